"""Following the log partition by partition, from a named checkpoint per partition.

The log is split into partitions by stream id, and a follower keeps one
checkpoint row per partition under its own name.  What it does with a page
of a partition is its subclass's ``run_once``, which must move that
partition's checkpoint in the transaction that does the work (so a page is
done exactly once, whoever does it); this module is the loop around it:
draining the partitions, waiting (and helping) until a partition passed a
cursor, and running until told to stop.  The projection runner and the
claims extraction worker are both followers, each with its own checkpoints.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from eventstore import EventStore, LogCursor
from projections.storage import checkpoints

IDLE_SLEEP_SECONDS = 0.01


class LogFollower(ABC):
    """A loop over the partitions of the log, from the checkpoints named ``name``."""

    def __init__(
        self,
        store: EventStore,
        name: str,
        *,
        partitions: int,
        threads: int,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.checkpoint_name = name
        self.partitions = partitions
        # SQLite has one writer: there the partitions are drained in turn.
        self.threads = 1 if store.embedded else max(1, threads)
        self.clock = clock
        with store.transaction() as tx:
            checkpoints.ensure_checkpoints(tx, name, partitions, clock())

    @abstractmethod
    def run_once(self, partition: int) -> int | None:
        """Do one page of ``partition`` and move its checkpoint past it, in one
        transaction; the events read, or ``None`` when another follower of the
        same name holds (or moved) the partition first."""

    def partition_of(self, stream_id: int) -> int:
        return stream_id % self.partitions

    def checkpoint(self, partition: int) -> LogCursor:
        with self.store.reading() as view:
            return checkpoints.read(view.connection, self.checkpoint_name, partition)

    def run_pending(self) -> int:
        """Do everything visible now in every free partition; the events read."""
        if self.threads == 1:
            return sum(self._drain(p) for p in range(self.partitions))
        with ThreadPoolExecutor(self.threads, thread_name_prefix=self.checkpoint_name) as pool:
            return sum(pool.map(self._drain, range(self.partitions)))

    def _drain(self, partition: int) -> int:
        """Pages of one partition until it has nothing visible left (or is held)."""
        total = 0
        while done := self.run_once(partition):
            total += done
        return total

    def catch_up(self, cursor: LogCursor, stream_id: int, timeout: float) -> bool:
        """Wait (helping along) until the stream's partition has passed ``cursor``."""
        partition = self.partition_of(stream_id)
        deadline = time.monotonic() + timeout
        while self.checkpoint(partition) < cursor:
            if time.monotonic() > deadline:
                return False
            if not self.run_once(partition):
                time.sleep(IDLE_SLEEP_SECONDS)
        return True

    def run_forever(self, stop: threading.Event, poll_interval: float = 0.2) -> None:
        """Keep going until ``stop`` is set (the loop of a worker thread or process)."""
        while not stop.is_set():
            if not self.run_pending():
                stop.wait(poll_interval)
