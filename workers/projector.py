"""Runs an asynchronous projection over the log, partition by partition.

The log is split into partitions by stream id.  Each batch of one partition
is applied in one transaction that also moves that partition's checkpoint;
the checkpoint row is locked for the batch, so any number of runners (threads
in one process, or worker processes on PostgreSQL) share the partitions
without ever applying an event twice, and every stream is applied in order.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from sqlalchemy.engine import Connection

from eventstore import EventStore, LogCursor, RecordedEvent, SubjectCipher, Transaction
from eventstore.ids import SYSTEM_NAMESPACE
from eventstore.store import utc_now
from projections import events as ev
from projections.base import Projection
from projections.storage import checkpoints

DEFAULT_PARTITIONS = 8
DEFAULT_BATCH_SIZE = 500
#: Partitions that ``run_pending`` drains at once on a server database: while
#: one thread waits for the server (its page, its writes, its commit), another
#: decodes and embeds.  SQLite has one writer, so there it drains them in turn.
DEFAULT_SERVER_THREADS = 2
IDLE_SLEEP_SECONDS = 0.01


class ProjectionRunner:
    """Applies one projection to the log from its checkpoints."""

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
        self.store = store
        self.projection = projection
        self.partitions = partitions
        self.batch_size = batch_size
        self.threads = 1 if store.embedded else max(1, threads)
        self.clock = clock
        with store.transaction() as tx:
            checkpoints.ensure_checkpoints(tx, projection.name, partitions, clock())

    def partition_of(self, stream_id: int) -> int:
        return stream_id % self.partitions

    def checkpoint(self, partition: int) -> LogCursor:
        with self.store.reading() as view:
            return checkpoints.read(view.connection, self.projection.name, partition)

    def run_once(self, partition: int) -> int | None:
        """Apply one batch of a partition; ``None`` when another runner holds it."""
        batch = self._apply_batch(partition)
        return None if batch is None else batch[0]

    def _apply_batch(self, partition: int) -> tuple[int, LogCursor] | None:
        """Apply one batch: how many events, and the partition's checkpoint after it
        (``None`` when another runner holds the partition)."""
        with self.store.transaction() as tx:
            cursor = checkpoints.claim(tx.connection, self.projection.name, partition)
            if cursor is None:
                return None
            page = self.store.read_all(
                cursor, self.batch_size, partition=(partition, self.partitions)
            )
            if not page.events:
                return 0, cursor
            self._apply_page(tx, page.events)
            checkpoints.advance(
                tx.connection, self.projection.name, partition, page.next_cursor, self.clock()
            )
            return len(page.events), page.next_cursor

    def run_pending(self) -> int:
        """Apply everything visible now in every free partition; the number of events."""
        if self.threads == 1:
            return sum(self._drain(p) for p in range(self.partitions))
        with ThreadPoolExecutor(self.threads, thread_name_prefix="projector") as pool:
            return sum(pool.map(self._drain, range(self.partitions)))

    def _drain(self, partition: int) -> int:
        """Apply batches of one partition until it has nothing visible left (or is held)."""
        total = 0
        while applied := self.run_once(partition):
            total += applied
        return total

    def catch_up(
        self,
        cursor: LogCursor,
        stream_id: int,
        timeout: float,
        *,
        checkpoint: LogCursor | None = None,
    ) -> bool:
        """Wait (helping along) until the stream's partition has applied ``cursor``.

        ``checkpoint`` is the partition's checkpoint if the caller just read it (a
        state token holds it).  A batch this call applies tells where it left the
        checkpoint, so a consistent read right after a write costs one batch, not
        a batch and more looks at the checkpoint.
        """
        partition = self.partition_of(stream_id)
        deadline = time.monotonic() + timeout
        reached = self.checkpoint(partition) if checkpoint is None else checkpoint
        while reached < cursor:
            if time.monotonic() > deadline:
                return False
            batch = self._apply_batch(partition)
            if batch is not None and batch[0]:
                reached = batch[1]
                continue
            time.sleep(IDLE_SLEEP_SECONDS)  # held elsewhere, or not visible yet
            reached = self.checkpoint(partition)
        return True

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

    def run_forever(self, stop: threading.Event, poll_interval: float = 0.2) -> None:
        """Keep applying until ``stop`` is set (the loop of a worker thread or process)."""
        while not stop.is_set():
            if not self.run_pending():
                stop.wait(poll_interval)

    def _apply_page(self, tx: Transaction, page: list[RecordedEvent]) -> None:
        ciphers: dict[int, SubjectCipher | None] = {}
        applicable: list[tuple[SubjectCipher, RecordedEvent]] = []
        for event in page:
            if (
                event.stream.namespace == SYSTEM_NAMESPACE
                or event.type not in ev.MEMORY_EVENT_TYPES
            ):
                continue
            stream_id = event.stream.stream_id
            if stream_id not in ciphers:
                ciphers[stream_id] = tx.cipher(stream_id)
            cipher = ciphers[stream_id]
            if cipher is not None:  # a destroyed key means the subject was forgotten
                applicable.append((cipher, event))
        self.projection.apply_page(tx.connection, applicable)
