"""``Transaction.lock_stream``: the one way to lock a stream, by id or by subject."""

from __future__ import annotations

import pytest

from eventstore import EventStore, InvalidInputError, NewEvent, Subject


def test_a_stream_is_found_by_subject_and_by_id_alike(store: EventStore) -> None:
    [event] = store.append("default", "ada", [NewEvent("memory.stored", {"n": 1})])
    with store.transaction() as tx:
        by_subject = tx.lock_stream(Subject("default", "ada"))
        by_id = tx.lock_stream(event.stream.stream_id)
    assert by_subject is not None
    assert by_id is not None
    assert by_subject.ref == by_id.ref == event.stream


def test_nothing_is_locked_or_created_without_create(store: EventStore) -> None:
    with store.transaction() as tx:
        assert tx.lock_stream(Subject("default", "nobody")) is None
        assert tx.lock_stream(987_654) is None
    assert store.read_stream("default", "nobody") == []


def test_create_opens_a_new_generation_after_the_last_one_closed(store: EventStore) -> None:
    [event] = store.append("default", "bea", [NewEvent("memory.stored", {"n": 1})])
    with store.transaction() as tx:
        tx.close_stream(event.stream.stream_id)
    with store.transaction() as tx:
        closed = tx.lock_stream(Subject("default", "bea"))
        assert closed is not None
        assert closed.closed_at is not None
        opened = tx.lock_stream(Subject("default", "bea"), create=True)
    assert opened.closed_at is None
    assert opened.ref.generation == event.stream.generation + 1


def test_create_needs_a_subject(store: EventStore) -> None:
    [event] = store.append("default", "cy", [NewEvent("memory.stored", {"n": 1})])
    with store.transaction() as tx, pytest.raises(InvalidInputError, match="Subject"):
        tx.lock_stream(event.stream.stream_id, create=True)  # type: ignore[call-overload]
