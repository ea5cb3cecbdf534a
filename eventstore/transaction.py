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
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from eventstore import audit_index, crypto, subject_rights
from eventstore.audit import AUDIT_NAMESPACE, AUDIT_SUBJECT, AuditEntry
from eventstore.backends.port import Backend
from eventstore.batch import DerivedRows, Placement, encode_batch, recorded_events, seal_batch
from eventstore.codec import EncodedEvent, EventCodec, SubjectCipher, WrappedKey, from_json_bytes
from eventstore.errors import (
    DuplicateEventError,
    EventErasedError,
    InvalidInputError,
    KeyUnavailableError,
    OperationalError,
    SubjectRestrictedError,
    WrongExpectedVersionError,
)
from eventstore.ids import SYSTEM_NAMESPACE, check_namespace, check_subject
from eventstore.model import (
    ANY,
    ExpectedVersion,
    KeyDestruction,
    NewEvent,
    RecordedEvent,
    StreamRef,
    Subject,
    Tombstone,
)
from eventstore.reader import (
    LATEST_STREAM_ID,
    STREAM_BY_ID,
    STREAM_WITH_KEY,
    EventReads,
    latest_stream_params,
    recorded_event,
    subject_cipher,
)
from eventstore.rewrap import rewrap_batch
from eventstore.schema import audit_index as audit_index_table
from eventstore.schema import data_keys, events, stream_directory, streams

if TYPE_CHECKING:
    from eventstore.heads import StreamHeads

Clock = Callable[[], datetime]
T = TypeVar("T")

# Where an appended event stands in the log before the database has placed it.
_UNPLACED: Placement = (0, 0)


#: What an append derives from its events before their place in the log is known
#: (position and commit group 0), given the stream's cipher: the rows written with
#: the append (the inline projection's) and what the caller gets back beside the
#: events.  It must not read: it may run before any lock, at a remembered head.
Derive = Callable[[SubjectCipher, list[RecordedEvent]], tuple[Sequence[DerivedRows], T]]


def _derive_nothing(
    _cipher: SubjectCipher, _appended: list[RecordedEvent]
) -> tuple[Sequence[DerivedRows], None]:
    return (), None


class HeadMovedError(Exception):
    """The append's condition found the stream head elsewhere (another writer moved
    it, or the generation was closed, its key destroyed, its processing restricted):
    nothing was written."""


def append_at(
    backend: Backend,
    conn: Connection,
    codec: EventCodec,
    at: AppendHead,
    cipher: SubjectCipher,
    encoded: Sequence[EncodedEvent],
    now: datetime,
    derive: Derive[T],
    *,
    last: bool = False,
) -> tuple[list[RecordedEvent], T]:
    """Seal ``encoded`` at the head ``at`` with ``cipher`` (its data key's, unwrapped
    for this append) and append it with what ``derive`` gives, in the backend's one
    append (``last``: the transaction ends with it, see ``Backend.append``); the
    events placed and what ``derive`` returned.
    Raises :class:`HeadMovedError` when the head was not there (nothing written)."""
    batch = seal_batch(
        codec,
        cipher.aead,
        at.ref,
        (at.version, at.chain_hash),
        encoded,
        now,
        past_restriction=_passes_restriction(encoded),
    )
    unplaced = recorded_events(batch, [_UNPLACED] * len(encoded))
    rows, derived = derive(cipher, unplaced)
    placements = backend.append(conn, batch, rows, last=last)
    if placements is None:
        raise HeadMovedError()
    placed = [_placed(event, at) for event, at in zip(unplaced, placements, strict=True)]
    return placed, derived


def _placed(event: RecordedEvent, at: Placement) -> RecordedEvent:
    """``event`` at its place in the log, ``(position, commit_group)``: built as reads
    build events, once per appended event (``dataclasses.replace`` lists the
    dataclass's fields and looks each one up by name first)."""
    position, group = at
    return recorded_event(
        event.event_id,
        event.stream,
        event.version,
        position,
        group,
        event.type,
        event.schema_version,
        event.recorded_at,
        event.data,
        event.metadata,
        event.digest,
        event.chain_hash,
        event.erasure,
        event.erasure_request_id,
    )


@dataclass(frozen=True)
class AppendHead:
    """Where a stream generation's head stands, with its data key as the stream's key
    row held it: wrapped under a KEK version, so that it opens nothing without the key
    provider (an append unwraps it for itself alone, see :mod:`eventstore.heads`)."""

    ref: StreamRef
    version: int
    chain_hash: bytes
    wrapped_key: WrappedKey


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
    #: Whether processing of the subject is restricted (GDPR Art. 18), read with the
    #: lock: a restriction starts and ends only under it (see ``Transaction.restrict``).
    restricted: bool = False


# Where a locking query's columns (the stream's, then its key's) sit in its rows.
_AT = {column.name: n for n, column in enumerate(STREAM_WITH_KEY.selected_columns)}
_CLOSED_AT, _RESTRICTED = _AT["closed_at"], _AT["restricted"]
_DEK_ID, _KEK_VERSION, _WRAPPED_KEY = _AT["dek_id"], _AT["kek_version"], _AT["wrapped_key"]


def _stream_from_row(row: Sequence[Any]) -> LockedStream:
    """A row of a locking query below.  The restriction comes with the lock, from the
    locked row itself (the register's state, kept on the stream row: see
    eventstore.schema.streams)."""
    stream_id, namespace, subject_key, generation, version, chain_hash = row[:6]
    ref = StreamRef(stream_id, namespace, subject_key, generation)
    wrapped_key = row[_WRAPPED_KEY]
    key = None if wrapped_key is None else WrappedKey(row[_DEK_ID], row[_KEK_VERSION], wrapped_key)
    return LockedStream(ref, version, chain_hash, row[_CLOSED_AT], key, bool(row[_RESTRICTED]))


# Only the stream row is locked (the key row is on the nullable side of the join).
_BY_ID_LOCKED = STREAM_BY_ID.with_for_update(of=streams)

# A new stream generation's rows (``Transaction._create_stream``), built once.
_INSERT_STREAM = streams.insert()
_INSERT_DATA_KEY = data_keys.insert()


def _passes_restriction(encoded: Sequence[EncodedEvent]) -> bool:
    """Whether a batch is written even for a subject whose processing is restricted:
    the restriction's own events, and what an operator writes acting on the
    restriction request.  Every other write is refused, under the lock and again
    by the append's own condition (``Backend.append``)."""
    if all(e.type in subject_rights.RESTRICTION_EVENTS for e in encoded):
        return True
    return subject_rights.acting_reference() is not None


class LatestStreams:
    """Each subject's latest stream id as this process last found it, by (namespace,
    subject key): a hint that saves the directory's read, never trusted alone.

    A hinted stream is locked and kept only when it is an open generation of that
    subject, which makes it the latest (see ``Transaction._lock_latest``); anything
    else (a generation closed by a forget, a creation rolled back) falls back to
    the directory.  Ids and keyed hashes only, content-free; at most ``capacity``
    subjects, forgotten all at once beyond that (a miss costs one read).
    """

    def __init__(self, capacity: int = 100_000) -> None:
        self._ids: dict[tuple[str, bytes], int] = {}
        self._capacity = capacity

    def get(self, namespace: str, subject_key: bytes) -> int | None:
        return self._ids.get((namespace, subject_key))

    def put(self, namespace: str, subject_key: bytes, stream_id: int) -> None:
        if len(self._ids) >= self._capacity:
            self._ids.clear()
        self._ids[namespace, subject_key] = stream_id


class Transaction:
    """A unit of work on the log; obtained from :meth:`EventStore.transaction`."""

    def __init__(
        self,
        conn: Connection,
        backend: Backend,
        reads: EventReads,
        codec: EventCodec,
        clock: Clock,
        heads: StreamHeads,
        latest: LatestStreams,
    ):
        self.connection = conn
        self.heads = heads
        self.backend = backend
        self.reads = reads
        self.codec = codec
        self.clock = clock
        self._latest = latest
        # Data keys unwrapped in this transaction, by wrapped key: an append and
        # the inline projection of a command both need the locked stream's key.
        self._unwrapped: dict[WrappedKey, bytes] = {}

    # -- locking ---------------------------------------------------------------------
    # A stream is locked by locking its row by id (FOR UPDATE; SQLite's single
    # writer holds every row).  A subject's latest generation is found first in the
    # stream directory, unlocked (see ``_lock_latest``): the row locked is then
    # addressed by its id alone, which a cluster routes to the one shard holding it.

    @overload
    def lock_stream(self, target: int | Subject) -> LockedStream | None: ...

    @overload
    def lock_stream(self, target: Subject, *, create: Literal[True]) -> LockedStream: ...

    def lock_stream(self, target: int | Subject, *, create: bool = False) -> LockedStream | None:
        """Lock a stream generation (open or closed) until the transaction ends.

        ``target`` is a stream id, or a ``Subject`` whose latest generation is
        locked; ``None`` when there is none.  With ``create=True`` the subject's
        *open* generation is locked, created when it has none (or only closed
        ones): commands that validate against current state lock first, so no
        other writer can change the stream between their checks and their append.
        """
        if isinstance(target, int):
            if create:
                raise InvalidInputError("create=True needs a Subject, not a stream id")
            return self._lock(_BY_ID_LOCKED, {"stream_id": target})
        check_namespace(target.namespace)
        subject_key = self.codec.subject_key(target.namespace, check_subject(target.subject))
        if create:
            return self._open(target.namespace, subject_key)
        return self._lock_latest(target.namespace, subject_key)

    def _lock(self, query: sa.Select[Any], params: dict[str, Any]) -> LockedStream | None:
        rows = self.backend.fetch(self.connection, query, params)
        return _stream_from_row(rows[0]) if rows else None

    def _lock_latest(self, namespace: str, subject_key: bytes) -> LockedStream | None:
        """Lock the subject's latest generation, ``None`` if it has none.

        The directory is read without a lock, so the generation found may have been
        followed by another before its row was locked.  Only a closed generation can
        be: the next one is created by a writer holding the closed one's lock (see
        ``_open``), and a close happens under that lock too.  So a locked open
        generation is the latest, and a closed one is checked against the directory
        again.  A directory row whose stream row is not visible (on a cluster, the
        moment between a creation's commit on the coordinator and on the shard) is
        read again too.
        """
        hinted = self._lock_hinted(namespace, subject_key)
        if hinted is not None:
            return hinted
        params = latest_stream_params(namespace, subject_key)
        for _ in range(_MAX_STREAM_ATTEMPTS):
            stream_id = self._latest_stream_id(params)
            if stream_id is None:
                return None
            stream = self._lock(_BY_ID_LOCKED, {"stream_id": stream_id})
            if stream is None:
                continue
            if stream.closed_at is None or self._latest_stream_id(params) == stream_id:
                self._latest.put(namespace, subject_key, stream_id)
                return stream
        raise OperationalError("the stream kept changing generation; retry")

    def _lock_hinted(self, namespace: str, subject_key: bytes) -> LockedStream | None:
        """The subject's stream this process found last, locked, if it is still an open
        generation of the subject (then the latest, see ``_lock_latest``); else ``None``."""
        stream_id = self._latest.get(namespace, subject_key)
        if stream_id is None:
            return None
        stream = self._lock(_BY_ID_LOCKED, {"stream_id": stream_id})
        if stream is None or stream.closed_at is not None:
            return None
        if (stream.ref.namespace, stream.ref.subject_key) != (namespace, subject_key):
            return None
        return stream

    def _latest_stream_id(self, params: dict[str, Any]) -> int | None:
        rows = self.backend.fetch(self.connection, LATEST_STREAM_ID, params)
        return rows[0][0] if rows else None

    def _open(self, namespace: str, subject_key: bytes) -> LockedStream:
        for _ in range(_MAX_STREAM_ATTEMPTS):
            stream = self._lock_latest(namespace, subject_key)
            if stream is not None and stream.closed_at is None:
                return stream
            generation = 1 if stream is None else stream.ref.generation + 1
            created = self._create_stream(namespace, subject_key, generation)
            if created is not None:
                return created
        raise OperationalError("the stream kept changing generation; retry the append")

    def _create_stream(
        self, namespace: str, subject_key: bytes, generation: int
    ) -> LockedStream | None:
        """The one way a stream generation is created: its directory row, its stream row
        and its data key, unless a concurrent writer created it first (``None``: the
        caller then locks that writer's stream).  The directory's unique key decides
        who was first.

        The new generation is returned as locked, without reading it back: rows this
        transaction inserted are seen by no other until it ends, so nobody can lock,
        append to, close or restrict them before; what they hold is what was inserted.
        """
        now = self.clock()
        claim = (
            self.backend.insert_unless_present(stream_directory)
            .values(namespace=namespace, subject_key=subject_key, generation=generation)
            .returning(stream_directory.c.stream_id)
        )
        stream_id = self.connection.execute(claim).scalar()
        if stream_id is None:
            return None
        chain_hash = crypto.stream_genesis(namespace, subject_key, generation)
        data_key, key = self.codec.new_data_key()
        # Sent with the transaction's next statement (on PostgreSQL the append's
        # pipeline, when the append follows): nothing reads them before.
        new_stream = {
            "stream_id": stream_id,
            "namespace": namespace,
            "subject_key": subject_key,
            "generation": generation,
            "version": 0,
            "chain_hash": chain_hash,
            "created_at": now,
        }
        self.backend.insert_before_next(self.connection, _INSERT_STREAM, new_stream)
        new_key = {
            "dek_id": key.dek_id,
            "stream_id": stream_id,
            "kek_version": key.kek_version,
            "wrapped_key": key.wrapped,
            "created_at": now,
        }
        self.backend.insert_before_next(self.connection, _INSERT_DATA_KEY, new_key)
        self._unwrapped[key] = data_key  # for this transaction only, as any unwrapped key
        self._latest.put(namespace, subject_key, stream_id)
        ref = StreamRef(stream_id, namespace, subject_key, generation)
        return LockedStream(ref, 0, chain_hash, None, key)

    # -- appending -----------------------------------------------------------------

    def append_locked(
        self,
        stream: LockedStream,
        new_events: Sequence[NewEvent],
        expected_version: ExpectedVersion = ANY,
    ) -> list[RecordedEvent]:
        """Append to a stream this transaction has locked (see :meth:`lock_stream`)."""
        if stream.closed_at is not None:
            raise EventErasedError("this stream generation was erased; nothing can be appended")
        encoded = encode_batch(self.codec, new_events, expected_version)
        return self._append_encoded(stream, encoded, expected_version)

    def append_each(
        self,
        stream: LockedStream,
        new_events: Sequence[NewEvent],
        derive: Derive[T],
        *,
        last: bool = False,
    ) -> tuple[list[tuple[RecordedEvent, bool]], T | None]:
        """Append to a locked stream, each event on its own idempotency: one whose
        caller-chosen id is in the log already must repeat it exactly
        (:class:`DuplicateEventError` otherwise) and comes back as stored, flagged
        True; the others are appended together, in order.  One lookup, one append.

        ``derive`` gives the rows the appended events derive (the inline projection's),
        written by the append itself (see :data:`Derive`).  What it returns comes
        back beside the events; ``None`` when nothing was appended.

        ``last``: nothing but the commit follows in this transaction, which may then
        go out with the append (one wait for both on PostgreSQL, see ``Backend.append``).

        The whole batch is validated before anything is written.
        """
        if stream.closed_at is not None:
            raise EventErasedError("this stream generation was erased; nothing can be appended")
        encoded = encode_batch(self.codec, new_events, ANY)
        chosen = [e.event_id for e in encoded if e.caller_id]
        earlier = {e.event_id: e for e in self.get_events(chosen)} if chosen else {}
        for event in encoded:
            if event.event_id in earlier:
                self._check_same(stream, event, earlier[event.event_id])
        fresh = [e for e in encoded if e.event_id not in earlier]
        written: list[RecordedEvent] = []
        derived = None
        if fresh:
            self._refuse_if_restricted(stream, fresh)
            written, derived = self._write(stream, fresh, derive, last=last)
        placed = iter(written)
        appended = [
            (earlier[e.event_id], True) if e.event_id in earlier else (next(placed), False)
            for e in encoded
        ]
        return appended, derived

    def append_encoded(
        self,
        namespace: str,
        subject_key: bytes,
        encoded: Sequence[EncodedEvent],
        expected_version: ExpectedVersion,
    ) -> list[RecordedEvent]:
        """Lock (or create) the subject's open stream and append validated events."""
        return self._append_encoded(self._open(namespace, subject_key), encoded, expected_version)

    def append_audit(self, entry: AuditEntry) -> RecordedEvent:
        """Append one entry to the content-free audit stream, and index it."""
        recorded = self._append(AUDIT_NAMESPACE, AUDIT_SUBJECT, [entry.to_event()], ANY)[0]
        audit_index.record(
            self.connection, self.insert_unless_present(audit_index_table), [recorded]
        )
        return recorded

    def cipher(self, stream_id: int) -> SubjectCipher | None:
        """The cipher of a stream's data key, or ``None`` once the key is destroyed."""
        return subject_cipher(self.connection, self.codec, stream_id)

    def locked_cipher(self, stream: LockedStream) -> SubjectCipher:
        """The cipher of a stream this transaction holds, from the key read with its lock.

        No second read: the key cannot be destroyed while the lock is held
        (erasure locks the stream first).
        """
        return SubjectCipher(self._data_key(stream), stream.ref.stream_id)

    def head_of(self, stream: LockedStream) -> AppendHead | None:
        """Where a stream this transaction holds stands now, with its wrapped data key
        (``None`` once the key is destroyed): what its next append may be sealed at."""
        if stream.wrapped_key is None or stream.closed_at is not None:
            return None
        return AppendHead(stream.ref, stream.version, stream.chain_hash, stream.wrapped_key)

    def insert_unless_present(self, table: sa.Table) -> Insert:
        """``INSERT`` into ``table`` skipping rows whose unique key exists (for tables
        that rows of several processes may race to create, like checkpoints and leases)."""
        return self.backend.insert_unless_present(table)

    def rewrap_data_keys(self, limit: int) -> int:
        """Re-wrap up to ``limit`` data keys not yet under the active KEK; how many."""
        return rewrap_batch(self.connection, self.codec, limit)

    def get_events(self, event_ids: Sequence[uuid.UUID]) -> list[RecordedEvent]:
        """The stored events among ``event_ids``, in log order, as this transaction sees them."""
        return self.reads.by_ids(self.connection, event_ids)

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
        self._refuse_if_restricted(stream, encoded)
        return self._write(stream, encoded, _derive_nothing)[0]

    def processing_restricted(self, stream: LockedStream) -> bool:
        """Whether processing of the stream's subject is restricted (GDPR Art. 18).

        The one predicate every automated path asks under the stream lock before it
        reads or decides anything about the subject (claim extraction, archiving,
        likely updates); a restriction cannot start or end while the lock is held.
        """
        return stream.ref.namespace != SYSTEM_NAMESPACE and stream.restricted

    def restrict(self, stream: LockedStream, ground: str, reference: str, now: datetime) -> None:
        """Restrict processing of the locked stream's subject (the register row)."""
        ref = stream.ref
        subject_rights.restrict(
            self.connection, ref.namespace, ref.subject_key, ground, reference, now
        )
        stream.restricted = True

    def lift_restriction(self, stream: LockedStream) -> bool:
        """End the locked stream's subject's restriction; whether there was one."""
        ref = stream.ref
        lifted = subject_rights.lift_restriction(self.connection, ref.namespace, ref.subject_key)
        stream.restricted = False
        return lifted

    def _refuse_if_restricted(self, stream: LockedStream, encoded: Sequence[EncodedEvent]) -> None:
        """New writes for a restricted subject are refused (see :meth:`_passes_restriction`)."""
        if not _passes_restriction(encoded) and self.processing_restricted(stream):
            raise SubjectRestrictedError()

    def _replayed(
        self, stream: LockedStream, encoded: Sequence[EncodedEvent]
    ) -> list[RecordedEvent] | None:
        """The stored batch if this append repeats it exactly, else ``None``."""
        ids = [e.event_id for e in encoded]
        existing = {e.event_id: e for e in self.get_events(ids)}
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

    def _write(
        self,
        stream: LockedStream,
        encoded: Sequence[EncodedEvent],
        derive: Derive[T],
        *,
        last: bool = False,
    ) -> tuple[list[RecordedEvent], T]:
        at = AppendHead(stream.ref, stream.version, stream.chain_hash, self._wrapped_key(stream))
        cipher = self.locked_cipher(stream)
        try:
            placed, derived = append_at(
                self.backend,
                self.connection,
                self.codec,
                at,
                cipher,
                encoded,
                self.clock(),
                derive,
                last=last,
            )
        except HeadMovedError as e:  # the stream row lock makes this unreachable
            raise OperationalError("stream head moved during the append; retry") from e
        stream.version, stream.chain_hash = placed[-1].version, placed[-1].chain_hash
        return placed, derived

    def _wrapped_key(self, stream: LockedStream) -> WrappedKey:
        if stream.wrapped_key is None:
            raise KeyUnavailableError("the data key of this stream was destroyed")
        return stream.wrapped_key

    def _data_key(self, stream: LockedStream) -> bytes:
        wrapped = self._wrapped_key(stream)
        key = self._unwrapped.get(wrapped)
        if key is None:
            key = self._unwrapped[wrapped] = self.codec.unwrap(wrapped)
        return key

    # -- erasure primitives ---------------------------------------------------

    def read_stream_id(self, stream_id: int, after_version: int = 0) -> list[RecordedEvent]:
        """Every event of one stream generation past ``after_version``, by version, as this
        transaction sees it (a certified delete reads only what came after its snapshot)."""
        return self.reads.of_stream(self.connection, stream_id, after_version)

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
        # Its wrapped copy leaves this process's remembered heads now (the stream
        # row refuses any append sealed with it anyway: see eventstore.heads).
        self.heads.drop_stream(stream_id)
        now = self.clock()
        # Stamping the stream row makes every later append's head move
        # (conditional on ``key_destroyed_at IS NULL``) write nothing, on top
        # of the lock this transaction holds.  Never destroy a key without it.
        self.connection.execute(
            streams.update().where(streams.c.stream_id == stream_id).values(key_destroyed_at=now)
        )
        return KeyDestruction(row.dek_id, row.kek_version, now)

    def close_stream(self, stream_id: int) -> None:
        """End a stream generation: the subject's next write starts a new one."""
        now = self.clock()
        self.connection.execute(
            streams.update()
            .where(streams.c.stream_id == stream_id, streams.c.closed_at.is_(None))
            .values(closed_at=now)
        )
