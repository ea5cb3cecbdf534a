"""The stream heads this process remembers, so that an append needs no lock first.

An append seals its batch at the head its process last saw for the subject
(version, chain hash, the data key as wrapped in the stream's key row) and writes
it with the head's conditional move (``Backend.append``): if another writer moved
the head, or the generation was closed, its key destroyed or its processing
restricted since, the condition writes nothing and the append reads the head again
under the stream's lock (``EventStore.append_each``).  A remembered head is never
trusted for anything else: no read decrypts with it, and a write it seals is
accepted only by a stream row that still says the same.

Data keys.  An entry holds its data key only wrapped, under the KEK version that
wrapped it then; each append unwraps it for itself (``EventCodec.unwrap``, a few
microseconds) and lets the unwrapped key go when it returns.  No unwrapped key of
any person is kept here, so none outlives the append that used it, whoever destroys
the key and whenever.  The wrapped copy opens nothing without the key provider: it
is exactly as dead as a backup's wrapped copy once its KEK version is retired
(docs/erasure.md, residual copies), and an append that finds its KEK version
retired since (a rotation re-wrapped the key row) unwraps nothing and takes the
stream's lock, which reads the key as it is wrapped now.  An entry stays until the
subject's next append misses, until this process erases the stream (dropped at
once, see ``Transaction.destroy_data_key``), until it is evicted, least recently
used first, beyond ``max_subjects``, or until the store closes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from eventstore.transaction import AppendHead

#: Subjects whose heads a process remembers by default (docs/operations.md, "Memory").
DEFAULT_MAX_SUBJECTS = 4096


class StreamHeads:
    """Least-recently-used stream heads by subject (namespace, subject key); thread-safe."""

    def __init__(self, max_subjects: int = DEFAULT_MAX_SUBJECTS) -> None:
        self.max_subjects = max_subjects
        self._heads: OrderedDict[tuple[str, bytes], AppendHead] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, namespace: str, subject_key: bytes) -> AppendHead | None:
        with self._lock:
            head = self._heads.get((namespace, subject_key))
            if head is not None:
                self._heads.move_to_end((namespace, subject_key))
            return head

    def put(self, head: AppendHead) -> None:
        """Remember ``head``, unless a later head of the same generation is remembered
        already (two threads' appends may finish in either order)."""
        key = (head.ref.namespace, head.ref.subject_key)
        with self._lock:
            known = self._heads.get(key)
            if (
                known is not None
                and known.ref.stream_id == head.ref.stream_id
                and known.version > head.version
            ):
                return
            self._heads[key] = head
            self._heads.move_to_end(key)
            while len(self._heads) > self.max_subjects:
                self._heads.popitem(last=False)

    def drop(self, head: AppendHead) -> None:
        """Forget ``head`` (found elsewhere by an append), unless it was replaced since."""
        key = (head.ref.namespace, head.ref.subject_key)
        with self._lock:
            if self._heads.get(key) is head:
                del self._heads[key]

    def drop_stream(self, stream_id: int) -> None:
        """Forget the head of one stream generation, whose key is being destroyed."""
        with self._lock:
            for key, head in list(self._heads.items()):
                if head.ref.stream_id == stream_id:
                    del self._heads[key]

    def clear(self) -> None:
        """Forget every head (the store is closing)."""
        with self._lock:
            self._heads.clear()

    def __len__(self) -> int:
        return len(self._heads)
