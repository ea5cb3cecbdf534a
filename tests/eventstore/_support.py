"""Small helpers shared by the event log's tests."""

from __future__ import annotations

import uuid

from eventstore import EventStore, Subject


def forget_generation(store: EventStore, namespace: str, subject: str) -> int:
    """What a forget does to the log: tombstone all, destroy the key, close; the stream id."""
    with store.transaction() as tx:
        stream = tx.lock_stream(Subject(namespace, subject))
        assert stream is not None
        ref = stream.ref
        tx.tombstone(ref.stream_id, None, uuid.uuid4())
        tx.destroy_data_key(ref.stream_id)
        tx.close_stream(ref.stream_id)
    return ref.stream_id
