"""Reading stored events back: one way to read, one decoder.

Every read is two statements through :meth:`Backend.fetch` (see :class:`EventReads`):
the events' rows (:data:`select_event_columns`), then the streams and data keys of
the streams among them, and hands both to :class:`EventDecoder`: per event that is
one AES-GCM decryption, one JSON parse and one value object; each stream's data
key is unwrapped once per call, not once per row.

Decoding never leaks crypto failures of erased data: a tombstoned row or a
row whose data key was destroyed comes back as an event with ``erasure`` set
and no content.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import crypto
from eventstore.codec import EventCodec, SubjectCipher, WrappedKey, parse_content
from eventstore.crypto import EVENT_AAD_LABEL, NONCE_BYTES, pack_event_aad
from eventstore.errors import IntegrityViolationError, KekRetiredError
from eventstore.model import Erasure, RecordedEvent, StreamRef
from eventstore.schema import data_keys, events, stream_directory, streams

if TYPE_CHECKING:
    from eventstore.backends.port import Backend

#: The event columns every read selects, in this order (see :meth:`EventDecoder.decode_all`).
EVENT_READ_COLUMNS = (
    "position",
    "commit_group",
    "event_id",
    "stream_id",
    "version",
    "type",
    "schema_version",
    "recorded_at",
    "payload",
    "digest",
    "chain_hash",
    "erasure_request_id",
)
_STREAM_ID = EVENT_READ_COLUMNS.index("stream_id")

#: Every read's event columns.  A stream's own columns and its data key come
#: from a second statement, once per stream instead of once per row: joined
#: into every row, they made a 1,000-event stream read half again as slow.
select_event_columns = sa.select(*(events.c[name] for name in EVENT_READ_COLUMNS))

#: A stream row with all its columns and its data key (NULLs once destroyed).
STREAM_WITH_KEY = sa.select(
    streams, data_keys.c.dek_id, data_keys.c.kek_version, data_keys.c.wrapped_key
).select_from(streams.outerjoin(data_keys, data_keys.c.stream_id == streams.c.stream_id))

#: The id of a subject's latest stream generation (parameters ``namespace`` and
#: ``subject_key``), from the directory: the one way a subject's stream is found.
#: ``streams`` is then read by id (:data:`STREAM_BY_ID`), in a statement of its own,
#: which a cluster routes to the one shard that holds the stream.
LATEST_STREAM_ID = (
    sa.select(stream_directory.c.stream_id)
    .where(
        stream_directory.c.namespace == sa.bindparam("namespace"),
        stream_directory.c.subject_key == sa.bindparam("subject_key"),
    )
    .order_by(stream_directory.c.generation.desc())
    .limit(1)
)

#: A stream row with its data key, by id (parameter ``stream_id``).
STREAM_BY_ID = STREAM_WITH_KEY.where(streams.c.stream_id == sa.bindparam("stream_id"))


def latest_stream_params(namespace: str, subject_key: bytes) -> dict[str, Any]:
    """The parameters of :data:`LATEST_STREAM_ID`."""
    return {"namespace": namespace, "subject_key": subject_key}


def latest_stream(conn: Connection, namespace: str, subject_key: bytes) -> sa.Row[Any] | None:
    """The subject's latest stream generation with its data key, or ``None``: two statements
    (:data:`LATEST_STREAM_ID`, then :data:`STREAM_BY_ID`)."""
    params = latest_stream_params(namespace, subject_key)
    stream_id = conn.execute(LATEST_STREAM_ID, params).scalar()
    if stream_id is None:
        return None
    return conn.execute(STREAM_BY_ID, {"stream_id": stream_id}).first()


#: AES-GCM's ``decrypt(nonce, ciphertext, aad)`` under one stream's data key.
Decrypt = Callable[[bytes, bytes, bytes], bytes]


class _Unfrozen:
    """RecordedEvent's slots, without its frozen ``__setattr__``: see :func:`recorded_event`."""

    __slots__ = RecordedEvent.__slots__


_new = object.__new__


def recorded_event(
    event_id: uuid.UUID,
    stream: StreamRef,
    version: int,
    position: int,
    commit_group: int,
    type_: str,
    schema_version: int,
    recorded_at: datetime,
    data: dict[str, Any] | None,
    metadata: dict[str, Any] | None,
    digest: bytes,
    chain_hash: bytes,
    erasure: Erasure | None,
    erasure_request_id: uuid.UUID | None,
) -> RecordedEvent:
    """``RecordedEvent(...)`` with the same arguments, built for bulk reads and appends.

    The frozen dataclass's ``__init__`` sets its 14 fields one by one through
    ``object.__setattr__``.  Here they are plain slot stores on an object of
    :class:`_Unfrozen`, which has the same slots, and the finished object then
    becomes a ``RecordedEvent`` by ``__class__`` assignment (Python allows it
    between classes of the same layout).  That is under half the time, and it
    counts per event read.  Nothing else ever sees the unfrozen object.
    (tests/eventstore/test_reads.py checks the two ways build equal events.)
    """
    event: Any = _new(_Unfrozen)
    event.event_id = event_id
    event.stream = stream
    event.version = version
    event.position = position
    event.commit_group = commit_group
    event.type = type_
    event.schema_version = schema_version
    event.recorded_at = recorded_at
    event.data = data
    event.metadata = metadata
    event.digest = digest
    event.chain_hash = chain_hash
    event.erasure = erasure
    event.erasure_request_id = erasure_request_id
    event.__class__ = RecordedEvent
    return event  # type: ignore[no-any-return]


class Decoded(NamedTuple):
    """Events read and decoded, and the ciphers of their streams (``None``: the
    stream's key is destroyed or its KEK retired), from the one read."""

    events: list[RecordedEvent]
    ciphers: dict[int, SubjectCipher | None]


class StreamState(NamedTuple):
    """What decoding needs of one stream: its reference and its decrypt, or why it has none."""

    ref: StreamRef
    decrypt: Decrypt | None
    gone: Erasure | None  # set when decrypt is None


class EventDecoder:
    """Turns event rows (columns as in :data:`EVENT_READ_COLUMNS`) into :class:`RecordedEvent`.

    Unwrapped data keys are kept only for the lifetime of one decoder (one
    read call) and of the ciphers it hands to that call's caller
    (:attr:`ciphers`), never in a process-wide cache: a key destroyed by another
    process must stop decrypting at once.
    """

    def __init__(self, codec: EventCodec, stream_rows: Iterable[Sequence[Any]]) -> None:
        self.codec = codec
        self._streams: dict[int, StreamState] = {}
        #: Each stream's cipher (``None``: its key is destroyed or its KEK retired).
        self.ciphers: dict[int, SubjectCipher | None] = {}
        for (
            stream_id,
            namespace,
            subject_key,
            generation,
            dek_id,
            kek_version,
            wrapped,
        ) in stream_rows:
            key = None if wrapped is None else WrappedKey(dek_id, kek_version, wrapped)
            self._stream(StreamRef(stream_id, namespace, subject_key, generation), key)

    def decode_all(self, rows: list[Sequence[Any]]) -> list[RecordedEvent]:
        """Decode every row, consuming ``rows``; the loop of every read.

        Each row is let go as soon as its event is built, so a read never holds
        all its rows (with their ciphertexts) and all its events at once.  That
        halves what a large read keeps alive at its peak, and with it what
        survives the collector's young passes into the old generation: after the
        event-log benchmark's append workloads, reading 40 log pages with the
        rows kept set off a full collection (70-85 ms in a process holding
        110,000 objects) in three runs of four, and in none with the rows let go.

        The work per event is written out here, not called: in CPython a
        Python-level call (to open the ciphertext, to parse it, to build the
        event) costs about as much as the work inside it, and every read runs
        this once per event.  Each written-out step names the function it
        stands for.
        """
        decoded: list[RecordedEvent] = []
        append, new, parse, pack_aad = decoded.append, _new, parse_content, pack_event_aad
        event: Any
        last_stream_id, ref, decrypt, gone = None, None, None, None
        rows.reverse()  # popped from the end, in the order they came
        while rows:
            (
                position,
                group,
                event_id,
                stream_id,
                version,
                type_,
                schema_version,
                recorded_at,
                payload,
                digest,
                chain_hash,
                request_id,
            ) = rows.pop()
            if stream_id != last_stream_id:  # pages hold runs of one stream's events
                ref, decrypt, gone = self._streams[stream_id]
                last_stream_id = stream_id
            data = metadata = erasure = None
            if payload is None:
                erasure = Erasure.TOMBSTONED
            elif decrypt is None:
                erasure = gone
            else:
                try:  # AeadKey.decrypt(payload, crypto.event_aad(event_id, stream_id, version))
                    plaintext = decrypt(
                        payload[:NONCE_BYTES],
                        payload[NONCE_BYTES:],
                        pack_aad(
                            EVENT_AAD_LABEL, event_id.int.to_bytes(16, "big"), stream_id, version
                        ),
                    )
                except crypto.AuthenticationFailed as e:
                    raise IntegrityViolationError("ciphertext failed authentication") from e
                data, metadata = parse(plaintext)
            event = new(_Unfrozen)  # recorded_event(...), the same stores
            event.event_id = event_id
            event.stream = ref
            event.version = version
            event.position = position
            event.commit_group = group
            event.type = type_
            event.schema_version = schema_version
            event.recorded_at = recorded_at
            event.data = data
            event.metadata = metadata
            event.digest = digest
            event.chain_hash = chain_hash
            event.erasure = erasure
            event.erasure_request_id = request_id
            event.__class__ = RecordedEvent
            append(event)
        return decoded

    def _stream(self, ref: StreamRef, wrapped: WrappedKey | None) -> StreamState:
        key = self._key(wrapped, ref.stream_id)
        if isinstance(key, Erasure):
            found = StreamState(ref, None, key)
            self.ciphers[ref.stream_id] = None
        else:
            found = StreamState(ref, key.decrypt_parts, None)
            self.ciphers[ref.stream_id] = key
        self._streams[ref.stream_id] = found
        return found

    def _key(self, wrapped: WrappedKey | None, stream_id: int) -> SubjectCipher | Erasure:
        if wrapped is None:
            return Erasure.KEY_DESTROYED
        try:
            return SubjectCipher(self.codec.unwrap(wrapped), stream_id)
        except KekRetiredError:
            # Retiring a KEK that still wraps live data keys makes them as
            # unreadable as destroyed ones; readers of the whole log must go on.
            # A KEK version that is merely missing (a misconfigured process)
            # stays an error: it must not pass for erased data.
            return Erasure.KEY_RETIRED


class EventReads:
    """The one way events are read: a statement of event rows, then their streams.

    The streams and data keys are read after the events they belong to, so a
    key destroyed in between reads back as erased; a key still there then was
    there when the events were read (a destroyed key never comes back).  The
    statements are built once per backend, with bound parameters only, as
    :meth:`Backend.fetch` asks.
    """

    def __init__(self, backend: Backend, codec: EventCodec) -> None:
        self.backend = backend
        self.codec = codec
        # The list restricts both tables, so that each is read through its own
        # index on ``stream_id``: with it on ``streams`` alone, PostgreSQL joined
        # by hashing the whole ``data_keys`` table, on every page of the log.
        keys_of_streams = sa.and_(
            data_keys.c.stream_id == streams.c.stream_id,
            backend.one_of(data_keys.c.stream_id, "stream_ids"),
        )
        self._streams_of = (
            sa.select(
                streams.c.stream_id,
                streams.c.namespace,
                streams.c.subject_key,
                streams.c.generation,
                data_keys.c.dek_id,
                data_keys.c.kek_version,
                data_keys.c.wrapped_key,
            )
            .select_from(streams.outerjoin(data_keys, keys_of_streams))
            .where(backend.one_of(streams.c.stream_id, "stream_ids"))
        )
        self._by_ids = select_event_columns.where(
            backend.one_of(events.c.event_id, "event_ids")
        ).order_by(events.c.position)
        # The same, of one namespace's streams only: another namespace's event is
        # not read at all, so it costs what an unknown id costs.
        namespace_streams = sa.select(streams.c.stream_id).where(
            streams.c.namespace == sa.bindparam("namespace", type_=sa.String())
        )
        self._by_ids_in_namespace = self._by_ids.where(events.c.stream_id.in_(namespace_streams))
        self._of_stream = select_event_columns.where(
            events.c.stream_id == sa.bindparam("stream_id", type_=sa.BigInteger()),
            events.c.version > sa.bindparam("after_version", type_=sa.BigInteger()),
        ).order_by(events.c.version)
        self._of_stream_up_to = select_event_columns.where(
            events.c.stream_id == sa.bindparam("stream_id", type_=sa.BigInteger()),
            events.c.version > sa.bindparam("after", type_=sa.BigInteger()),
            events.c.version <= sa.bindparam("up_to", type_=sa.BigInteger()),
        ).order_by(events.c.version)

    def read(
        self, conn: Connection, query: sa.Select[Any], params: dict[str, Any]
    ) -> list[RecordedEvent]:
        """The events of ``query`` (built on :data:`select_event_columns`), decoded."""
        return self.read_keyed(conn, query, params).events

    def read_keyed(
        self, conn: Connection, query: sa.Select[Any], params: dict[str, Any]
    ) -> Decoded:
        """:meth:`read`, with the ciphers of the events' streams.

        A caller that then reads the projection rows of those streams decrypts them
        with these ciphers: no statement of its own for a data key the read had
        already unwrapped.  They live as long as the caller keeps the result.
        """
        rows = self.backend.fetch(conn, query, params)
        if not rows:
            return Decoded([], {})
        return self._decoded(conn, rows, {row[_STREAM_ID] for row in rows})

    def _decoded(
        self, conn: Connection, rows: list[Sequence[Any]], stream_ids: Iterable[int]
    ) -> Decoded:
        """Event rows decoded with their streams, read now (after the rows)."""
        stream_rows = self.backend.fetch(conn, self._streams_of, {"stream_ids": list(stream_ids)})
        decoder = EventDecoder(self.codec, stream_rows)
        return Decoded(decoder.decode_all(rows), decoder.ciphers)

    def by_ids(
        self, conn: Connection, event_ids: Sequence[uuid.UUID], namespace: str | None = None
    ) -> list[RecordedEvent]:
        """The stored events among ``event_ids`` (of ``namespace``'s streams, if given),
        in log order."""
        if not event_ids:
            return []
        if namespace is None:
            return self.read(conn, self._by_ids, {"event_ids": list(event_ids)})
        params = {"event_ids": list(event_ids), "namespace": namespace}
        return self.read(conn, self._by_ids_in_namespace, params)

    def of_stream(
        self, conn: Connection, stream_id: int, after_version: int = 0
    ) -> list[RecordedEvent]:
        """Every event of one stream generation past ``after_version``, by version."""
        params = {"stream_id": stream_id, "after_version": after_version}
        return self.read(conn, self._of_stream, params)

    def stream_since(
        self, conn: Connection, stream_id: int, after_version: int, up_to_version: int
    ) -> Decoded:
        """The events of one stream generation after ``after_version`` up to
        ``up_to_version`` (no statement for them when there are none to ask), by
        version, and the stream's cipher, read after them (``None`` once its key is
        destroyed): what a reader of the stream's projection rows needs, in at most
        two statements."""
        rows = []
        if after_version < up_to_version:
            params = {"stream_id": stream_id, "after": after_version, "up_to": up_to_version}
            rows = self.backend.fetch(conn, self._of_stream_up_to, params)
        return self._decoded(conn, rows, (stream_id,))


#: Built once: every read that decrypts a projection's rows asks for a data key, and
#: building the statement (with its cache key) cost about as much CPU as running it.
_DATA_KEY = sa.select(data_keys).where(data_keys.c.stream_id == sa.bindparam("stream_id"))


def load_data_key(conn: Connection, codec: EventCodec, stream_id: int) -> bytes | None:
    """The unwrapped data key of a stream, or ``None`` once it was destroyed."""
    row = conn.execute(_DATA_KEY, {"stream_id": stream_id}).first()
    if row is None:
        return None
    return codec.unwrap(WrappedKey(row.dek_id, row.kek_version, row.wrapped_key))


def subject_cipher(conn: Connection, codec: EventCodec, stream_id: int) -> SubjectCipher | None:
    """A cipher for projections to encrypt personal values under the stream's key."""
    dek = load_data_key(conn, codec, stream_id)
    return None if dek is None else SubjectCipher(dek, stream_id)
