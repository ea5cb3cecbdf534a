"""Appends against heads another process moved, on both backends.

Two ``EventStore`` instances on one database stand for two processes: one
appends, the other moves, closes or de-keys the stream behind its back.
The database must decide every write: no event lands at a stale version,
under a destroyed key, or in a closed generation.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from eventstore import (
    ANY,
    Erasure,
    EventStore,
    KeyringFile,
    KeyUnavailableError,
    LogCursor,
    NewEvent,
    RecordedEvent,
    StreamRef,
    Subject,
    WrongExpectedVersionError,
    create_backend,
)
from eventstore.reader import recorded_event
from eventstore.schema import events
from tests.eventstore._support import forget_generation


def stored(content: object) -> NewEvent:
    return NewEvent("memory.stored", {"content": content})


@pytest.fixture
def other(any_database_url: str, keyring: KeyringFile) -> Iterator[EventStore]:
    """A second store on the same database: another process."""
    second = EventStore(create_backend(any_database_url), keyring)
    yield second
    second.close()


def payloads(store: EventStore) -> int:
    """Stored, not tombstoned event rows: what a write under a dead key would add to."""
    with store.backend.read_connection() as conn:
        query = sa.select(sa.func.count()).where(events.c.payload.is_not(None))
        return int(conn.execute(query).scalar_one())


def test_a_head_moved_by_another_process_is_caught_and_the_append_lands_after_it(
    store: EventStore, other: EventStore
) -> None:
    store.append("default", "alice", [stored("1")])  # store remembers version 1
    other.append("default", "alice", [stored("2")])  # other moves the head to 2
    [third] = store.append("default", "alice", [stored("3")])
    assert third.version == 3
    assert [e.data for e in other.read_stream("default", "alice")] == [
        {"content": "1"},
        {"content": "2"},
        {"content": "3"},
    ]
    assert store.verify().ok


def test_a_stale_expected_version_is_refused_and_writes_nothing(
    store: EventStore, other: EventStore
) -> None:
    store.append("default", "alice", [stored("1")])
    other.append("default", "alice", [stored("2")])
    with pytest.raises(WrongExpectedVersionError):
        store.append("default", "alice", [stored("late")], expected_version=1)
    assert [e.version for e in store.read_stream("default", "alice")] == [1, 2]
    [next_one] = store.append("default", "alice", [stored("3")], expected_version=2)
    assert next_one.version == 3


def test_no_write_lands_under_a_key_destroyed_by_another_process(
    store: EventStore, other: EventStore
) -> None:
    store.append("default", "alice", [stored("before")])  # store holds the wrapped key
    assert other.destroy_data_key("default", "alice") is not None
    written = payloads(store)
    with pytest.raises(KeyUnavailableError):
        store.append("default", "alice", [stored("after")])
    assert payloads(store) == written
    [event] = store.read_stream("default", "alice")
    assert event.erasure is Erasure.KEY_DESTROYED


def test_no_write_lands_in_a_generation_another_process_closed(
    store: EventStore, other: EventStore
) -> None:
    [old] = store.append("default", "alice", [stored("old life")])
    forget_generation(other, "default", "alice")
    [new] = store.append("default", "alice", [stored("new life")])
    assert (new.version, new.stream.generation) == (1, 2)
    assert new.stream.stream_id != old.stream.stream_id
    assert [e.data for e in other.read_stream("default", "alice")] == [{"content": "new life"}]
    assert store.verify().ok


def test_racing_first_appends_to_a_new_subject_both_land_once(
    store: EventStore, other: EventStore
) -> None:
    subjects = [f"newcomer-{n}" for n in range(8)]
    ready = threading.Barrier(2)
    results: dict[str, list[RecordedEvent]] = {"store": [], "other": []}

    def write(name: str, target: EventStore) -> None:
        for subject in subjects:
            ready.wait(timeout=30)
            results[name] += target.append("default", subject, [stored(name)], ANY)

    threads = [
        threading.Thread(target=write, args=(n, s)) for n, s in (("store", store), ("other", other))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for subject in subjects:
        read = store.read_stream("default", subject)
        assert [e.version for e in read] == [1, 2]
        assert {e.stream.generation for e in read} == {1}
        assert sorted(e.data["content"] for e in read if e.data) == ["other", "store"]
    assert store.verify().ok


def test_integers_beyond_64_bits_and_long_digit_runs_read_back_exactly(store: EventStore) -> None:
    data = {"big": 2**70, "negative": -(2**80), "digits": "1" * 25, "small": 7, "x": 0.1}
    [written] = store.append("default", "alice", [NewEvent("memory.stored", data, {"n": 2**65})])
    [read] = store.read_stream("default", "alice")
    assert read.data == data == written.data
    assert read.metadata == {"n": 2**65}
    assert isinstance(read.data["big"], int)


def test_the_bulk_constructor_of_read_events_equals_the_dataclass() -> None:
    values = (
        uuid.uuid4(),
        StreamRef(1, "default", b"k" * 32, 1),
        3,
        17,
        5,
        "memory.stored",
        1,
        datetime.now(UTC),
        {"a": 1},
        {},
        b"d" * 32,
        b"c" * 32,
        Erasure.TOMBSTONED,
        uuid.uuid4(),
    )
    built, plain = recorded_event(*values), RecordedEvent(*values)
    assert type(built) is RecordedEvent
    assert built == plain
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.version = 2  # type: ignore[misc]
    assert built.cursor == plain.cursor == LogCursor(5, 17)
    assert repr(built) == repr(plain)
    # Slotted: a read keeps one per event alive, without an instance dictionary.
    assert not hasattr(built, "__dict__")


def test_the_head_read_sees_the_stream_as_the_log_does(store: EventStore) -> None:
    assert store.head("default", "alice") is None
    [first, second] = store.append("default", "alice", [stored("1"), stored("2")])
    head = store.head("default", "alice")
    assert head is not None
    assert (head.stream.stream_id, head.stream.generation, head.version, head.chain_hash) == (
        first.stream.stream_id,
        1,
        2,
        second.chain_hash,
    )
    assert head.closed_at is None
    assert head.key_destroyed_at is None
    assert store.head("other-namespace", "alice") is None

    store.destroy_data_key("default", "alice")
    destroyed = store.head("default", "alice")
    assert destroyed is not None
    assert destroyed.key_destroyed_at is not None

    with store.transaction() as tx:
        locked = tx.lock_stream(Subject("default", "alice"))
        assert locked is not None
        tx.close_stream(locked.ref.stream_id)
    closed = store.head("default", "alice")
    assert closed is not None
    assert closed.closed_at is not None
    [reborn] = store.append("default", "alice", [stored("3")])
    latest = store.head("default", "alice")
    assert latest is not None
    assert (latest.stream.stream_id, latest.stream.generation, latest.version) == (
        reborn.stream.stream_id,
        2,
        1,
    )


def test_a_process_that_never_wrote_a_stream_appends_at_the_head_it_reads(
    store: EventStore, other: EventStore
) -> None:
    store.append("default", "alice", [stored("1"), stored("2")])
    [third] = other.append("default", "alice", [stored("3")], expected_version=2)
    assert third.version == 3
    forget_generation(store, "default", "alice")
    [reborn] = other.append("default", "alice", [stored("new life")])  # its head is stale now
    assert (reborn.stream.generation, reborn.version) == (2, 1)
