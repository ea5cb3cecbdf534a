"""Reading stored events back: one SELECT shape, one decoder.

Decoding never leaks crypto failures of erased data: a tombstoned row or a
row whose data key was destroyed comes back as an event with ``erasure`` set
and no content.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.codec import EventCodec, SubjectCipher, WrappedKey
from eventstore.errors import KekRetiredError
from eventstore.model import Erasure, LogCursor, RecordedEvent, StreamRef
from eventstore.schema import data_keys, events, streams

select_events = sa.select(
    events,
    streams.c.namespace,
    streams.c.subject_key,
    streams.c.generation,
    data_keys.c.dek_id,
    data_keys.c.kek_version,
    data_keys.c.wrapped_key,
).select_from(
    events.join(streams, streams.c.stream_id == events.c.stream_id).outerjoin(
        data_keys, data_keys.c.stream_id == events.c.stream_id
    )
)


class EventDecoder:
    """Turns rows of :data:`select_events` into :class:`RecordedEvent` values.

    Unwrapped data keys are kept only for the lifetime of one decoder (one
    read call), never in a process-wide cache: a key destroyed by another
    process must stop decrypting at once.
    """

    def __init__(self, codec: EventCodec) -> None:
        self.codec = codec
        self._deks: dict[uuid.UUID, bytes] = {}

    def decode_all(self, rows: Iterable[sa.Row[Any]]) -> list[RecordedEvent]:
        return [self.decode(row) for row in rows]

    def decode(self, row: sa.Row[Any]) -> RecordedEvent:
        erasure, data, metadata = self._content(row)
        return RecordedEvent(
            event_id=row.event_id,
            stream=StreamRef(row.stream_id, row.namespace, row.subject_key, row.generation),
            version=row.version,
            position=row.position,
            cursor=LogCursor(row.commit_group, row.position),
            type=row.type,
            schema_version=row.schema_version,
            recorded_at=row.recorded_at,
            data=data,
            metadata=metadata,
            digest=row.digest,
            chain_hash=row.chain_hash,
            erasure=erasure,
            erasure_request_id=row.erasure_request_id,
        )

    def _content(
        self, row: sa.Row[Any]
    ) -> tuple[Erasure | None, dict[str, Any] | None, dict[str, Any] | None]:
        if row.payload is None:
            return Erasure.TOMBSTONED, None, None
        if row.wrapped_key is None:
            return Erasure.KEY_DESTROYED, None, None
        try:
            dek = self._dek(WrappedKey(row.dek_id, row.kek_version, row.wrapped_key))
        except KekRetiredError:
            # Retiring a KEK that still wraps live data keys makes them as
            # unreadable as destroyed ones; readers of the whole log must go on.
            # A KEK version that is merely missing (a misconfigured process)
            # stays an error: it must not pass for erased data.
            return Erasure.KEY_RETIRED, None, None
        data, metadata = self.codec.open(
            dek, row.event_id, row.stream_id, row.version, row.payload, row.metadata
        )
        return None, data, metadata

    def _dek(self, key: WrappedKey) -> bytes:
        if key.dek_id not in self._deks:
            self._deks[key.dek_id] = self.codec.unwrap(key)
        return self._deks[key.dek_id]


def read_by_ids(
    conn: Connection, codec: EventCodec, event_ids: Sequence[uuid.UUID]
) -> list[RecordedEvent]:
    """The stored events among ``event_ids``, in log order."""
    if not event_ids:
        return []
    stmt = select_events.where(events.c.event_id.in_(event_ids)).order_by(events.c.position)
    return EventDecoder(codec).decode_all(conn.execute(stmt))


def load_data_key(conn: Connection, codec: EventCodec, stream_id: int) -> bytes | None:
    """The unwrapped data key of a stream, or ``None`` once it was destroyed."""
    row = conn.execute(sa.select(data_keys).where(data_keys.c.stream_id == stream_id)).first()
    if row is None:
        return None
    return codec.unwrap(WrappedKey(row.dek_id, row.kek_version, row.wrapped_key))


def subject_cipher(conn: Connection, codec: EventCodec, stream_id: int) -> SubjectCipher | None:
    """A cipher for projections to encrypt personal values under the stream's key."""
    dek = load_data_key(conn, codec, stream_id)
    return None if dek is None else SubjectCipher(dek, stream_id)
