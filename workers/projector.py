"""Runs an asynchronous projection over the log, partition by partition.

The log is split into partitions by stream id.  Each batch of one partition
is applied in one transaction that also moves that partition's checkpoint;
the checkpoint row is locked for the batch, so any number of runners (threads
in one process, or worker processes on PostgreSQL) share the partitions
without ever applying an event twice, and every stream is applied in order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime

from sqlalchemy.engine import Connection

from eventstore import EventStore, LogCursor, LogPage, RecordedEvent, SubjectCipher, Transaction
from eventstore.ids import SYSTEM_NAMESPACE
from eventstore.store import utc_now
from projections import events as ev
from projections.base import Projection
from projections.storage import checkpoints
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
        partitions of ``stream_ids`` (``None``: every partition), in partition order.

        No batch of those partitions is in flight until the caller commits: one
        that started earlier has committed (what it wrote is visible to the
        caller's next statements), and the next one sees what the caller wrote.
        """
        held = (
            range(self.partitions)
            if stream_ids is None
            else {self.partition_of(stream_id) for stream_id in stream_ids}
        )
        for partition in sorted(held):
            checkpoints.hold(conn, self.projection.name, partition)

    def _apply_page(self, tx: Transaction, page: LogPage) -> None:
        """Apply the page's memory events of subjects whose key lives.

        Their rows are sealed with the ciphers the page's read unwrapped (read
        after the claim, as a data key read of its own in this transaction was):
        a destroyed key means the subject was forgotten, and its events read back
        erased anyway.
        """
        applicable: list[tuple[SubjectCipher, RecordedEvent]] = []
        for event in page.events:
            if (
                event.stream.namespace == SYSTEM_NAMESPACE
                or event.type not in ev.MEMORY_EVENT_TYPES
            ):
                continue
            cipher = page.ciphers.get(event.stream.stream_id)
            if cipher is not None:
                applicable.append((cipher, event))
        self.projection.apply_page(tx.connection, applicable)
