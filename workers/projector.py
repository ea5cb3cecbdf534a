"""Runs an asynchronous projection over the log, partition by partition, and
catches one stream up for a consistent read.

The log is split into partitions by stream id.  Each batch of one partition
is applied in one transaction that also moves that partition's checkpoint;
the checkpoint row is locked for the batch, so any number of runners (threads
in one process, or worker processes on PostgreSQL) share the partitions.

What is applied of each stream is its mark (``projections.storage.stream_marks``):
both ways in, a partition's page and a read's catch-up of its own stream
(:meth:`ProjectionRunner.catch_up_stream`), go through :meth:`ProjectionRunner.
_apply_marked`, which locks the marks of the streams it applies, applies only the
events after them and moves them in the same transaction.  So an event is
applied exactly once, whoever reaches it first, and every stream in version
order.  A catch-up reads its stream by stream id: on Citus one shard, committed
with one-phase commit, instead of a page of the partition over every shard.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime

from sqlalchemy.engine import Connection

from eventstore import EventStore, LogCursor, LogPage, RecordedEvent, SubjectCipher, Transaction
from eventstore.errors import OperationalError
from eventstore.ids import SYSTEM_NAMESPACE
from eventstore.store import utc_now
from projections import events as ev
from projections.base import Projection
from projections.storage import checkpoints, stream_marks
from projections.storage.stream_marks import StreamMark
from workers.follower import FollowedPage, LogFollower

DEFAULT_PARTITIONS = 8
DEFAULT_BATCH_SIZE = 500
#: Partitions that ``run_pending`` drains at once on a server database: while
#: one thread waits for the server (its page, its writes, its commit), another
#: decodes and embeds.  SQLite has one writer, so there it drains them in turn.
DEFAULT_SERVER_THREADS = 2


class ProjectionRunner(LogFollower):
    """Applies one projection to the log from its checkpoints (named after it)."""

    def __init__(
        self,
        store: EventStore,
        projection: Projection,
        *,
        partitions: int = DEFAULT_PARTITIONS,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int = DEFAULT_SERVER_THREADS,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.projection = projection
        self.batch_size = batch_size
        super().__init__(
            store, projection.name, partitions=partitions, threads=threads, clock=clock
        )

    def follow_page(self, partition: int, after: LogCursor | None = None) -> FollowedPage | None:
        """Apply one batch of a partition: how many events, and the partition's
        checkpoint after it (``None`` when another runner holds the partition); a
        projection writes its own rows, never to the log.
        ``after`` is not needed: the claim reads the checkpoint it locks."""
        # Not durable: the batch writes projection rows and their checkpoint only,
        # which the log replays if a power loss drops the commit.
        with self.store.transaction(durable=False) as tx:
            fetch = self.store.backend.fetch
            cursor = checkpoints.claim(tx.connection, self.projection.name, partition, fetch)
            if cursor is None:
                return None
            page = self.read_page(partition, cursor, self.batch_size)
            if page.next_cursor == cursor:
                return FollowedPage(0, cursor)
            if page.events:
                self._apply_page(tx, page)
            checkpoints.advance(
                tx.connection,
                self.projection.name,
                partition,
                page.next_cursor,
                self.clock(),
                self.store.backend.write_at_commit,
            )
            return FollowedPage(len(page.events), page.next_cursor)

    def hold(self, conn: Connection, stream_ids: Collection[int] | None = None) -> None:
        """Wait for and lock, for the caller's transaction, the checkpoints of the
        partitions of ``stream_ids`` (``None``: every partition), in partition order,
        then those streams' marks (``None``: every stream's).

        No batch of those partitions and no catch-up of those streams is in flight
        until the caller commits: one that started earlier has committed (what it
        wrote is visible to the caller's next statements), and the next one sees
        what the caller wrote.
        """
        held = (
            range(self.partitions)
            if stream_ids is None
            else {self.partition_of(stream_id) for stream_id in stream_ids}
        )
        for partition in sorted(held):
            checkpoints.hold(conn, self.projection.name, partition)
        if stream_ids is None:
            stream_marks.hold_all(conn)
        else:
            stream_marks.lock(conn, self.projection.name, stream_ids)

    def catch_up_stream(self, stream_id: int, version: int, timeout: float) -> bool:
        """Apply the stream's events up to ``version`` that are not applied yet, in one
        transaction of the stream's own rows (what a consistent read of the subject
        waits for); ``False`` if ``timeout`` (seconds) is not positive: a read that
        may not wait does not start one.

        It waits for a runner's page or an erasure that holds the stream's mark
        (short transactions), then finds done what that one did.
        """
        if timeout <= 0:
            return False
        deadline = time.monotonic() + timeout
        try:
            with self.store.transaction(durable=False) as tx:
                conn = tx.connection
                stream_marks.bound_lock_waits(conn, self.store.backend.fetch, timeout)
                mark = stream_marks.lock(conn, self.projection.name, [stream_id])[stream_id]
                if mark.version >= version:
                    return True
                # Read after the lock: an erasure that held it has committed, and its
                # tombstones (or the destroyed key) are what this read sees.
                read = tx.reads.stream_since(conn, stream_id, mark.version, version)
                if read.ciphers.get(stream_id) is None:
                    raise _ForgottenError()  # nothing to apply, and no mark to leave behind
                self._apply_marked(tx, read.events, read.ciphers, {stream_id: mark})
        except _ForgottenError:
            return True  # the read finds the subject forgotten
        except OperationalError:
            if time.monotonic() < deadline:
                raise  # not the lock wait given up at the deadline
            return False
        return True

    def _apply_page(self, tx: Transaction, page: LogPage) -> None:
        """Apply a partition's page: its events of each stream past that stream's mark."""
        # A forgotten subject's (no cipher) gets no mark: its rows are purged for good.
        streams = {
            e.stream.stream_id
            for e in page.events
            if _followed(e) and page.ciphers.get(e.stream.stream_id) is not None
        }
        marks = stream_marks.lock(tx.connection, self.projection.name, streams)
        self._apply_marked(tx, page.events, page.ciphers, marks)

    def _apply_marked(
        self,
        tx: Transaction,
        events: Sequence[RecordedEvent],
        ciphers: Mapping[int, SubjectCipher | None],
        marks: dict[int, StreamMark],
    ) -> None:
        """Apply, in the order given, the memory events past their stream's mark (held
        locked in ``marks``) of subjects whose key lives, and move those marks past
        every event read of their streams.

        Their rows are sealed with the ciphers the read unwrapped (read after the
        marks were locked): a destroyed key means the subject was forgotten, and
        its events read back erased anyway.
        """
        applicable: list[tuple[SubjectCipher, RecordedEvent]] = []
        moved: dict[int, StreamMark] = {}
        for event in events:
            stream_id = event.stream.stream_id
            mark = moved.get(stream_id, marks.get(stream_id))
            if mark is None or event.version <= mark.version:
                continue  # not followed, or applied already (by a catch-up)
            moved[stream_id] = StreamMark(event.version, event.cursor)
            cipher = ciphers.get(stream_id)
            if cipher is not None and event.type in ev.MEMORY_EVENT_TYPES:
                applicable.append((cipher, event))
        self.projection.apply_page(tx.connection, applicable)
        write = self.store.backend.write_at_commit
        stream_marks.advance(tx.connection, self.projection.name, moved, write)


class _ForgottenError(Exception):
    """A catch-up found its stream's key destroyed: it rolls back, so that the mark a
    forget purged is not written again."""


def _followed(event: RecordedEvent) -> bool:
    """Whether the projection follows the event's stream (the audit stream it does not)."""
    return event.stream.namespace != SYSTEM_NAMESPACE
