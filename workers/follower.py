"""Following the log partition by partition, from a named checkpoint per partition.

The log is split into partitions by stream id, and a follower keeps one
checkpoint row per partition under its own name.  What it does with a page
of a partition is its subclass's ``follow_page``, which must move that
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
from typing import NamedTuple

from eventstore import EventStore, LogCursor, LogPage, Transaction
from projections.storage import checkpoints

IDLE_SLEEP_SECONDS = 0.01


class FollowedPage(NamedTuple):
    """One page a follower did: the events read, its partition's checkpoint after them,
    and whether it may have appended to the log (a follower that records decisions as
    events; false only when it certainly appended nothing)."""

    events: int
    cursor: LogCursor
    appended: bool = False


class CaughtUp(NamedTuple):
    """A partition passed the cursor a caller waited for (:meth:`LogFollower.catch_up`)."""

    #: False only if this call did every page up to the cursor and none of them
    #: appended: then the log holds nothing the follower wrote since the caller looked.
    may_have_appended: bool


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
    def follow_page(self, partition: int, after: LogCursor | None = None) -> FollowedPage | None:
        """Do one page of ``partition`` and move its checkpoint past it, in one
        transaction: the page done (see :class:`FollowedPage`), or ``None``
        when another follower of the same name holds (or moved) the partition first.

        ``after`` is the partition's checkpoint if the caller has just read it (a
        follower that reads its page before its transaction then needs no read of
        its own; the transaction still checks that the checkpoint is there)."""

    def run_once(self, partition: int) -> int | None:
        """One page of ``partition``: the events read, or ``None`` when it is held."""
        page = self.follow_page(partition)
        return None if page is None else page.events

    def read_page(self, partition: int, cursor: LogCursor, limit: int) -> LogPage:
        """The partition's next page after ``cursor``.

        A page that finds nothing ends at the head of the log it looked
        through, not at ``cursor``: nothing of the partition lies up to there,
        so moving the checkpoint to it keeps an idle partition's next scan
        from starting behind everything other partitions wrote since.
        """
        where = (partition, self.partitions)
        page = self.store.read_all(cursor, limit, partition=where)
        if page.events:
            return page
        head = self.store.log_head(cursor)
        if head == cursor:
            return page
        # The head is read before this second look: all up to it had committed,
        # so a look that still finds nothing proves the partition has nothing there.
        again = self.store.read_all(cursor, limit, partition=where)
        return again if again.events else LogPage([], head)

    def move_checkpoint(
        self, tx: Transaction, partition: int, expected: LogCursor, cursor: LogCursor
    ) -> bool:
        """Move the partition's checkpoint from ``expected`` to ``cursor`` as the
        transaction's first statement (``checkpoints.move``, which goes out with the
        BEGIN): the step of a follower that read and judged its page before its
        transaction; ``False`` if another moved it first."""
        fetch = self.store.backend.fetch
        return checkpoints.move(
            tx.connection, self.checkpoint_name, partition, expected, cursor, self.clock(), fetch
        )

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

    def catch_up(
        self,
        cursor: LogCursor,
        stream_id: int,
        timeout: float,
        *,
        checkpoint: LogCursor | None = None,
    ) -> CaughtUp | None:
        """Wait (helping along) until the stream's partition has passed ``cursor``, and
        say whether the follower may have appended meanwhile; ``None`` (false) on timeout.

        ``checkpoint`` is the partition's checkpoint if the caller just read it (a
        state token holds it).  A page this call does tells where it left the
        checkpoint, so a consistent read right after a write costs one page, not
        a page and more looks at the checkpoint.  A stretch another process did
        counts as appended: what it wrote is not known here.
        """
        partition = self.partition_of(stream_id)
        deadline = time.monotonic() + timeout
        reached = self.checkpoint(partition) if checkpoint is None else checkpoint
        appended = checkpoint is None
        while reached < cursor:
            if time.monotonic() > deadline:
                return None
            page = self.follow_page(partition, reached)
            if page is not None and page.cursor > reached:
                reached, appended = page.cursor, appended or page.appended
                continue
            time.sleep(IDLE_SLEEP_SECONDS)  # held elsewhere, or not visible yet
            reached, appended = self.checkpoint(partition), True
        return CaughtUp(may_have_appended=appended)

    def run_forever(self, stop: threading.Event, poll_interval: float = 0.2) -> None:
        """Keep going until ``stop`` is set (the loop of a worker thread or process)."""
        while not stop.is_set():
            if not self.run_pending():
                stop.wait(poll_interval)
