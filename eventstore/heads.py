"""Stream heads this process wrote last, so that its next append can skip the lock.

An append normally locks the stream row to learn the head (version, chain
hash) and the wrapped data key before it writes: on PostgreSQL that is
BEGIN, the locked read, the write and COMMIT, four round trips.  A process
that appended to a stream a moment ago usually knows all of that already.
With a remembered head it seals the events straight away and sends one
conditional statement that moves the head only if it is still there.  A
process that does not know the head reads it without a lock (the same
conditional write then decides), and a subject's first generation is created
together with its data key and first events.

Nothing here is trusted for safety; the database decides every write.

* The write is conditional on the stream row: same version (so the chain
  hash too), generation not closed, ``key_destroyed_at`` not set.  Closing a
  generation and destroying its key both update that row (see
  :meth:`Transaction.destroy_data_key`), so once either has committed no
  write lands under the old head: the condition fails, nothing is written,
  and the append takes the locked path, which sees the truth.
* Only the *wrapped* key is kept.  It is unwrapped again for every append,
  so a retired KEK stops it exactly as it stops the locked path.  Nothing
  read back ever comes from here: reads always go to the database.
* A stale entry costs one failed statement and the locked path, never a
  wrong write.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import NamedTuple

from eventstore import crypto
from eventstore.backend import Backend
from eventstore.batch import SealedBatch, recorded_events, seal_batch, with_companions
from eventstore.codec import EncodedEvent, EventCodec, WrappedKey
from eventstore.companions import Companions
from eventstore.errors import KeyUnavailableError
from eventstore.model import ANY, ExpectedVersion, RecordedEvent, StreamRef
from eventstore.transaction import LockedStream

FIRST_GENERATION = 1

DEFAULT_CAPACITY = 10_000


class KnownHead(NamedTuple):
    """Where this process last left a stream, and the stream's wrapped data key.

    A named tuple: immutable, and cheaper to build than a frozen dataclass
    (one is made per append).
    """

    stream: StreamRef
    version: int
    chain_hash: bytes
    wrapped_key: WrappedKey


class HeadCache:
    """A bounded, thread-safe map (namespace, subject key) → :class:`KnownHead`."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._heads: OrderedDict[tuple[str, bytes], KnownHead] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, namespace: str, subject_key: bytes) -> KnownHead | None:
        with self._lock:
            return self._heads.get((namespace, subject_key))

    def put(self, head: KnownHead) -> None:
        key = (head.stream.namespace, head.stream.subject_key)
        with self._lock:
            self._heads[key] = head
            self._heads.move_to_end(key)
            if len(self._heads) > self._capacity:
                self._heads.popitem(last=False)

    def forget(self, namespace: str, subject_key: bytes) -> None:
        with self._lock:
            self._heads.pop((namespace, subject_key), None)


class OptimisticAppends:
    """Appends that write in one step at a head this process knows or has just read.

    :meth:`append` returns ``None``, having written nothing, whenever the
    locked path must decide: caller-chosen ids (a replay needs the
    idempotency check), an expected version that does not match, a closed
    generation, a destroyed or unreadable key, or a head that moved.
    ``companions`` derives rows of other tables that are written under the
    same condition as the events (:mod:`eventstore.companions`).
    """

    def __init__(self, backend: Backend, codec: EventCodec, clock: Callable[[], datetime]) -> None:
        self.backend = backend
        self.codec = codec
        self.clock = clock
        self.heads = HeadCache()

    def append(
        self,
        namespace: str,
        subject_key: bytes,
        encoded: Sequence[EncodedEvent],
        expected_version: ExpectedVersion,
        companions: Companions | None = None,
    ) -> list[RecordedEvent] | None:
        if any(e.caller_id for e in encoded):
            return None
        head = self.heads.get(namespace, subject_key)
        if head is None:
            # Not written by this process lately: read the head without a
            # lock (the write re-checks it), or create the first generation.
            stream = self.backend.peek_latest_stream(namespace, subject_key)
            if stream is None:
                if expected_version not in (ANY, 0):
                    return None
                return self._create_and_append(namespace, subject_key, encoded, companions)
            if stream.closed or stream.wrapped_key is None:
                return None  # a new generation, or an error: the locked path knows which
            ref = StreamRef(stream.stream_id, namespace, subject_key, stream.generation)
            head = KnownHead(ref, stream.version, stream.chain_hash, stream.wrapped_key)
        if expected_version not in (ANY, head.version):
            return None
        return self._append_at(head, encoded, companions)

    def remember(self, stream: LockedStream) -> None:
        """Note where a committed append through the locked path left the stream."""
        if stream.closed_at is not None or stream.wrapped_key is None:
            self.heads.forget(stream.ref.namespace, stream.ref.subject_key)
            return
        key = stream.wrapped_key
        self.heads.put(KnownHead(stream.ref, stream.version, stream.chain_hash, key))

    def _append_at(
        self, head: KnownHead, encoded: Sequence[EncodedEvent], companions: Companions | None
    ) -> list[RecordedEvent] | None:
        namespace, subject_key = head.stream.namespace, head.stream.subject_key
        try:
            dek = self.codec.unwrap(head.wrapped_key)
        except KeyUnavailableError:
            self.heads.forget(namespace, subject_key)
            return None
        at = (head.version, head.chain_hash)
        batch = seal_batch(self.codec, dek, head.stream, at, encoded, self.clock())
        batch = with_companions(batch, dek, companions)
        placements = self.backend.append_committed(batch)
        if placements is None:
            self.heads.forget(namespace, subject_key)
            return None
        # Built directly: dataclasses.replace inspects the fields on every call.
        self.heads.put(
            KnownHead(head.stream, batch.new_version, batch.chain_hash, head.wrapped_key)
        )
        return recorded_events(batch, placements)

    def _create_and_append(
        self,
        namespace: str,
        subject_key: bytes,
        encoded: Sequence[EncodedEvent],
        companions: Companions | None,
    ) -> list[RecordedEvent] | None:
        """Create the subject's first stream generation, its data key and the events at once."""
        dek, wrapped = self.codec.new_data_key()
        now = self.clock()
        genesis = crypto.stream_genesis(namespace, subject_key, FIRST_GENERATION)

        def seal(stream_id: int) -> SealedBatch:
            ref = StreamRef(stream_id, namespace, subject_key, FIRST_GENERATION)
            batch = seal_batch(self.codec, dek, ref, (0, genesis), encoded, now)
            return with_companions(batch, dek, companions)

        created = self.backend.create_stream_committed(seal, wrapped)
        if created is None:  # another writer created it first
            return None
        batch, placements = created
        self.heads.put(KnownHead(batch.stream, batch.new_version, batch.chain_hash, wrapped))
        return recorded_events(batch, placements)
