"""Access counts: how often retrieval returned each node, batched in memory.

Semvec's retention grows with how often a memory is used.  A read must stay
a read, so a retrieval appends no event: each process counts the nodes it
returned in memory, and a writer thread of its own writes them in one
transaction every ``flush_seconds`` while there are any (and :meth:`AccessLog.close`
writes the rest).  No retrieval waits for that write: its cost stays off the
query path.  A process that dies loses at most that last batch: these are
statistics, never an acknowledged write.  Another process sees the written
counts when it next loads the subject's index.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy.engine import Connection

from eventstore import EventStore
from projections.model import Node
from projections.storage.access_store import Access, AccessStore
from projections.storage.tables import node_access

log = logging.getLogger(__name__)

#: How long counts wait in memory before the writer thread writes them.  A write
#: takes some 20 ms on SQLite (one transaction, fsync): every 5 s it overlaps well
#: under 1% of queries, so it stays out of retrieval's p99 (every 1 s it did not).
DEFAULT_FLUSH_SECONDS = 5.0
#: Failed writes in a row after which the pending counts are dropped, not retried:
#: statistics are not worth an unbounded backlog (or a warning a second forever
#: once the database is gone).
MAX_FAILED_WRITES = 3

#: stream id → node id → (its source event id, accesses not yet written, last access).
_Pending = dict[int, dict[uuid.UUID, tuple[uuid.UUID, int, datetime]]]


class AccessLog:
    """This process's retrieval counts not yet written, and their writer. Thread-safe."""

    def __init__(self, store: EventStore, flush_seconds: float = DEFAULT_FLUSH_SECONDS) -> None:
        self.store = store
        self.flush_seconds = flush_seconds
        self._pending: _Pending = {}
        #: The batch being written: still counted by pending() until it commits, so a
        #: subject loaded meanwhile in this process does not miss it.
        self._writing: _Pending = {}
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._closed = threading.Event()
        self._writer: threading.Thread | None = None
        self._failed_writes = 0

    def record(self, stream_id: int, returned: Iterable[Node], at: datetime) -> None:
        """Count one access of each node in ``returned``; the writer thread writes it."""
        with self._lock:
            counts = self._pending.setdefault(stream_id, {})
            for node in returned:
                _, before, _ = counts.get(node.id, (node.event_id, 0, at))
                counts[node.id] = (node.event_id, before + 1, at)
            if self._writer is None and not self._closed.is_set():
                # Started on the first count: a process that never retrieves has none.
                self._writer = threading.Thread(
                    target=self._write_periodically, name="access-counts", daemon=True
                )
                self._writer.start()

    def _write_periodically(self) -> None:
        while not self._closed.wait(self.flush_seconds):
            self.flush()

    def close(self) -> None:
        """Stop the writer thread and write what is pending (before the store closes)."""
        self._closed.set()
        with self._lock:
            writer = self._writer
        if writer is not None:
            writer.join()
        self.flush()

    def pending(self, stream_id: int) -> dict[uuid.UUID, int]:
        """Node id → accesses of this process not yet written."""
        with self._lock:
            found: dict[uuid.UUID, int] = {}
            for batch in (self._writing, self._pending):
                for node, (_, n, _) in batch.get(stream_id, {}).items():
                    found[node] = found.get(node, 0) + n
            return found

    def counts(self, conn: Connection, stream_id: int) -> dict[uuid.UUID, int]:
        """Written counts (read on ``conn``) plus this process's pending ones."""
        counts = AccessStore(conn).counts(stream_id)
        for node, n in self.pending(stream_id).items():
            counts[node] = counts.get(node, 0) + n
        return counts

    def flush(self) -> int:
        """Write the pending counts; how many nodes' counts were written.

        A failed write puts the batch back for the next flush and is logged,
        not raised: it runs on the writer thread, with no caller to tell.
        After :data:`MAX_FAILED_WRITES` failures in a row the batch is dropped.
        """
        with self._flushing:  # one batch in flight at a time (writer thread, close)
            with self._lock:
                batch, self._pending = self._pending, {}
                self._writing = batch
            if not batch:
                return 0
            try:
                self._write(batch)
            except Exception:
                self._failed_writes += 1
                keep = self._failed_writes < MAX_FAILED_WRITES
                log.warning(
                    "access counts not written (%s)", "kept" if keep else "dropped", exc_info=keep
                )
                self._put_back(batch if keep else {})
                return 0
            self._put_back({})
            self._failed_writes = 0
            return sum(len(counts) for counts in batch.values())

    def _write(self, batch: _Pending) -> None:
        # Not durable: statistics, which a process that dies loses anyway.
        with self.store.transaction(durable=False) as tx:
            create = tx.insert_unless_present(node_access)
            # Streams in id order: two flushing processes lock them alike.
            for stream_id in sorted(batch):
                stream = tx.lock_stream(stream_id)
                if stream is None or stream.closed_at is not None:
                    continue  # forgotten meanwhile: its counts go with it
                accesses = [
                    Access(event_id, node_id, delta, at)
                    for node_id, (event_id, delta, at) in batch[stream_id].items()
                ]
                AccessStore(tx.connection).add(create, stream_id, accesses)

    def _put_back(self, batch: _Pending) -> None:
        """End the write in flight, returning ``batch`` to the pending counts."""
        with self._lock:
            self._writing = {}
            for stream_id, counts in batch.items():
                mine = self._pending.setdefault(stream_id, {})
                for node_id, (event_id, delta, at) in counts.items():
                    _, more, last = mine.get(node_id, (event_id, 0, at))
                    mine[node_id] = (event_id, delta + more, max(at, last))
