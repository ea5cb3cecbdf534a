"""One write transaction on the log.

Everything that must commit together goes through one :class:`Transaction`:
appends, the inline projection that validates against current state, and the
erasure primitives (tombstones, key destruction, closing a stream generation,
the audit entry).  Either all of it commits or none of it does.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import crypto
from eventstore.audit import AUDIT_NAMESPACE, AUDIT_SUBJECT, AuditEntry
from eventstore.backend import Backend
from eventstore.batch import encode_batch, recorded_events, seal_batch
from eventstore.codec import EncodedEvent, EventCodec, SubjectCipher, WrappedKey, from_json_bytes
from eventstore.errors import (
    DuplicateEventError,
    EventErasedError,
    KeyUnavailableError,
    OperationalError,
    WrongExpectedVersionError,
)
from eventstore.ids import check_namespace, check_subject
from eventstore.model import (
    ANY,
    ExpectedVersion,
    KeyDestruction,
    NewEvent,
    RecordedEvent,
    StreamRef,
    Tombstone,
)
from eventstore.reader import read_by_ids, read_stream_rows, subject_cipher
from eventstore.schema import data_keys, events, streams

Clock = Callable[[], datetime]

# Appends racing a forget may find their stream generation closed after they
# waited for its lock; they then move to the next generation.  More than a
# few rounds means something is wrong, not busy.
_MAX_STREAM_ATTEMPTS = 3


@dataclass
class LockedStream:
    """A stream row, locked for the rest of the transaction.

    ``version`` and ``chain_hash`` follow appends made through the same
    transaction.
    """

    ref: StreamRef
    version: int
    chain_hash: bytes
    closed_at: datetime | None
    wrapped_key: WrappedKey | None = None  # None once the data key is destroyed


# The stream row and its data key in one round trip; only the stream row is
# locked (the key row is on the nullable side of the join).
_stream_with_key = sa.select(
    streams, data_keys.c.dek_id, data_keys.c.kek_version, data_keys.c.wrapped_key
).select_from(streams.outerjoin(data_keys, data_keys.c.stream_id == streams.c.stream_id))


# Built once, with bound parameters: every append and store runs one of
# these, and building the statement is a fifth of the locked read's cost.
_LATEST_UNLOCKED = (
    _stream_with_key.where(
        streams.c.namespace == sa.bindparam("namespace"),
        streams.c.subject_key == sa.bindparam("subject_key"),
    )
    .order_by(streams.c.generation.desc())
    .limit(1)
)
_LATEST_LOCKED = _LATEST_UNLOCKED.with_for_update(of=streams)


def _subject(namespace: str, subject_key: bytes) -> dict[str, Any]:
    return {"namespace": namespace, "subject_key": subject_key}


def _stream_from_row(row: sa.Row[Any]) -> LockedStream:
    ref = StreamRef(row.stream_id, row.namespace, row.subject_key, row.generation)
    key = (
        None
        if row.wrapped_key is None
        else WrappedKey(row.dek_id, row.kek_version, row.wrapped_key)
    )
    return LockedStream(ref, row.version, row.chain_hash, row.closed_at, key)


class Transaction:
    """A unit of work on the log; obtained from :meth:`EventStore.transaction`."""

    def __init__(self, conn: Connection, backend: Backend, codec: EventCodec, clock: Clock):
        self.connection = conn
        self.backend = backend
        self.codec = codec
        self.clock = clock
        # Data keys unwrapped in this transaction, by wrapped key: an append and
        # the inline projection of a command both need the locked stream's key.
        self._unwrapped: dict[WrappedKey, bytes] = {}
        # Streams this transaction appended to, by id, as it leaves them: the
        # event store remembers their heads once the transaction commits, so
        # that the process's next append to them can take the optimistic path.
        self._appended: dict[int, LockedStream] = {}

    # -- appending -----------------------------------------------------------------

    def append(
        self,
        namespace: str,
        subject: str,
        new_events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
    ) -> list[RecordedEvent]:
        """Append ``new_events`` to the subject's stream, atomically and in order.

        Replaying a batch whose event ids all exist with identical content
        returns the stored events and writes nothing.
        """
        check_namespace(namespace)
        return self._append(namespace, check_subject(subject), new_events, expected_version)

    def open_stream(self, namespace: str, subject: str) -> LockedStream:
        """Lock the subject's open stream generation, creating it when needed.

        Commands that validate against current state lock first, so no other
        writer can change the stream between their checks and their append.
        """
        check_namespace(namespace)
        subject_key = self.codec.subject_key(namespace, check_subject(subject))
        return self._lock_current_stream(namespace, subject_key)

    def lock_stream_id(self, stream_id: int) -> LockedStream | None:
        """Lock a stream generation by id (open or closed), if it exists."""
        row = self.connection.execute(
            _stream_with_key.where(streams.c.stream_id == stream_id).with_for_update(of=streams)
        ).first()
        return None if row is None else _stream_from_row(row)

    def append_locked(
        self,
        stream: LockedStream,
        new_events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
    ) -> list[RecordedEvent]:
        """Append to a stream this transaction has locked (see :meth:`open_stream`)."""
        if stream.closed_at is not None:
            raise EventErasedError("this stream generation was erased; nothing can be appended")
        encoded = encode_batch(self.codec, new_events, expected_version)
        return self._append_encoded(stream, encoded, expected_version)

    def appended_streams(self) -> list[LockedStream]:
        """The streams this transaction appended to, with their heads after it."""
        return list(self._appended.values())

    def cipher(self, stream_id: int) -> SubjectCipher | None:
        """The cipher of a stream's data key, or ``None`` once the key is destroyed."""
        return subject_cipher(self.connection, self.codec, stream_id)

    def locked_cipher(self, stream: LockedStream) -> SubjectCipher:
        """The cipher of a stream this transaction holds, from the key read with its lock.

        No second read: the key cannot be destroyed while the lock is held
        (erasure locks the stream first).
        """
        return SubjectCipher(self._data_key(stream), stream.ref.stream_id)

    def append_audit(self, entry: AuditEntry) -> RecordedEvent:
        """Append one entry to the content-free audit stream."""
        return self._append(AUDIT_NAMESPACE, AUDIT_SUBJECT, [entry.to_event()], ANY)[0]

    def _append(
        self,
        namespace: str,
        subject: str,
        new_events: Sequence[NewEvent],
        expected_version: ExpectedVersion,
    ) -> list[RecordedEvent]:
        encoded = encode_batch(self.codec, new_events, expected_version)
        subject_key = self.codec.subject_key(namespace, subject)
        return self.append_encoded(namespace, subject_key, encoded, expected_version)

    def append_encoded(
        self,
        namespace: str,
        subject_key: bytes,
        encoded: Sequence[EncodedEvent],
        expected_version: ExpectedVersion,
    ) -> list[RecordedEvent]:
        """Lock the subject's stream and append validated events."""
        stream = self._lock_current_stream(namespace, subject_key)
        return self._append_encoded(stream, encoded, expected_version)

    def _append_encoded(
        self,
        stream: LockedStream,
        encoded: Sequence[EncodedEvent],
        expected_version: ExpectedVersion,
    ) -> list[RecordedEvent]:
        # Only ids the caller chose can exist already: generated ones are fresh.
        if any(e.caller_id for e in encoded):
            replayed = self._replayed(stream, encoded)
            if replayed is not None:
                return replayed
        if expected_version is not ANY and expected_version != stream.version:
            raise WrongExpectedVersionError(int(expected_version), stream.version)
        return self._write(stream, encoded)

    def _lock_current_stream(self, namespace: str, subject_key: bytes) -> LockedStream:
        """Lock the subject's open stream generation, creating it when needed."""
        for _ in range(_MAX_STREAM_ATTEMPTS):
            row = self.connection.execute(_LATEST_LOCKED, _subject(namespace, subject_key)).first()
            if row is not None and row.closed_at is None:
                return _stream_from_row(row)
            generation = 1 if row is None else row.generation + 1
            self._create_stream(namespace, subject_key, generation)
        raise OperationalError("the stream kept changing generation; retry the append")

    def _create_stream(self, namespace: str, subject_key: bytes, generation: int) -> None:
        # ON CONFLICT DO NOTHING: a concurrent writer may create the same
        # generation first; we then lock theirs on the next loop round.
        stmt = (
            self.backend.insert_ignoring_duplicates(streams)
            .values(
                namespace=namespace,
                subject_key=subject_key,
                generation=generation,
                version=0,
                chain_hash=crypto.stream_genesis(namespace, subject_key, generation),
                created_at=self.clock(),
            )
            .returning(streams.c.stream_id)
        )
        stream_id = self.connection.execute(stmt).scalar()
        if stream_id is not None:
            _, wrapped = self.codec.new_data_key()
            self._insert_data_key(stream_id, wrapped)

    def _insert_data_key(self, stream_id: int, key: WrappedKey) -> None:
        self.connection.execute(
            data_keys.insert().values(
                dek_id=key.dek_id,
                stream_id=stream_id,
                kek_version=key.kek_version,
                wrapped_key=key.wrapped,
                created_at=self.clock(),
            )
        )

    def _replayed(
        self, stream: LockedStream, encoded: Sequence[EncodedEvent]
    ) -> list[RecordedEvent] | None:
        """The stored batch if this append repeats it exactly, else ``None``."""
        ids = [e.event_id for e in encoded]
        existing = {e.event_id: e for e in read_by_ids(self.connection, self.codec, ids)}
        if not existing:
            return None
        for event in encoded:
            stored = existing.get(event.event_id)
            if stored is None:
                raise DuplicateEventError("part of this batch was already appended")
            self._check_same(stream, event, stored)
        return [existing[i] for i in ids]

    def _check_same(self, stream: LockedStream, event: EncodedEvent, stored: RecordedEvent) -> None:
        if stored.erased:
            raise EventErasedError()
        same = (
            stored.stream.stream_id == stream.ref.stream_id
            and stored.type == event.type
            and stored.schema_version == event.schema_version
            and stored.data is not None
            and stored.data == from_json_bytes(event.payload)
            and stored.metadata == from_json_bytes(event.metadata)
        )
        if not same:
            raise DuplicateEventError()

    def _write(self, stream: LockedStream, encoded: Sequence[EncodedEvent]) -> list[RecordedEvent]:
        head = (stream.version, stream.chain_hash)
        batch = seal_batch(
            self.codec, self._data_key(stream), stream.ref, head, encoded, self.clock()
        )
        placements = self.backend.insert_events(self.connection, batch)
        if placements is None:  # the stream row lock makes this unreachable
            raise OperationalError("stream head moved during the append; retry")
        stream.version, stream.chain_hash = batch.new_version, batch.chain_hash
        self._appended[stream.ref.stream_id] = stream
        return recorded_events(batch, placements)

    def _data_key(self, stream: LockedStream) -> bytes:
        if stream.wrapped_key is None:
            raise KeyUnavailableError("the data key of this stream was destroyed")
        key = self._unwrapped.get(stream.wrapped_key)
        if key is None:
            key = self._unwrapped[stream.wrapped_key] = self.codec.unwrap(stream.wrapped_key)
        return key

    # -- erasure primitives ---------------------------------------------------

    def find_stream(self, namespace: str, subject: str) -> LockedStream | None:
        """Lock the subject's latest stream generation (open or closed) without creating one."""
        check_namespace(namespace)
        subject_key = self.codec.subject_key(namespace, check_subject(subject))
        row = self.connection.execute(_LATEST_LOCKED, _subject(namespace, subject_key)).first()
        return None if row is None else _stream_from_row(row)

    def lock_stream(self, namespace: str, subject: str) -> StreamRef | None:
        """Lock the subject's latest stream generation (open or closed), if any."""
        stream = self.find_stream(namespace, subject)
        return None if stream is None else stream.ref

    def read_stream_id(self, stream_id: int) -> list[RecordedEvent]:
        """Every event of one stream generation, by version, as this transaction sees it."""
        return read_stream_rows(self.connection, self.codec, stream_id)

    def tombstone(
        self, stream_id: int, event_ids: Sequence[uuid.UUID] | None, erasure_request_id: uuid.UUID
    ) -> list[Tombstone]:
        """Remove the payload of events in one stream (all when ``event_ids`` is None).

        Position, version, id, type, digest and chain hash stay, so the chain
        still verifies.  Already erased events are left as they are.
        """
        condition = sa.and_(events.c.stream_id == stream_id, events.c.payload.is_not(None))
        if event_ids is not None:
            condition = sa.and_(condition, events.c.event_id.in_(list(event_ids)))
        erased = self.connection.execute(
            events.update()
            .where(condition)
            .values(
                payload=None,
                erased_at=self.clock(),
                erasure_request_id=erasure_request_id,
            )
            .returning(
                events.c.event_id,
                events.c.version,
                events.c.position,
                events.c.type,
                events.c.digest,
                events.c.chain_hash,
            )
        ).all()
        tombstones = [
            Tombstone(
                row.event_id,
                row.version,
                row.position,
                row.type,
                row.digest,
                row.chain_hash,
                erasure_request_id,
            )
            for row in erased
        ]
        return sorted(tombstones, key=lambda t: t.version)

    def destroy_data_key(self, stream_id: int) -> KeyDestruction:
        """Delete the stream's data key; its ciphertext becomes unreadable for good."""
        row = self.connection.execute(
            data_keys.delete()
            .where(data_keys.c.stream_id == stream_id)
            .returning(data_keys.c.dek_id, data_keys.c.kek_version)
        ).first()
        if row is None:
            raise KeyUnavailableError("the data key of this stream is already destroyed")
        now = self.clock()
        # Stamping the stream row is what stops optimistic appends of other
        # processes that still hold this key wrapped in their head cache: their
        # write is conditional on ``key_destroyed_at IS NULL`` (see
        # EventStore.append).  Never destroy a key without it.
        self.connection.execute(
            streams.update().where(streams.c.stream_id == stream_id).values(key_destroyed_at=now)
        )
        if stream_id in self._appended:
            self._appended[stream_id].wrapped_key = None
        return KeyDestruction(row.dek_id, row.kek_version, now)

    def close_stream(self, stream_id: int) -> None:
        """End a stream generation: the subject's next write starts a new one."""
        now = self.clock()
        self.connection.execute(
            streams.update()
            .where(streams.c.stream_id == stream_id, streams.c.closed_at.is_(None))
            .values(closed_at=now)
        )
        if stream_id in self._appended:
            self._appended[stream_id].closed_at = now
