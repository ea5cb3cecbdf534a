"""Reading streams back: long streams in chunks, a read that fails half-way, old plaintexts."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from eventstore import (
    START,
    Erasure,
    EventStore,
    IntegrityViolationError,
    NewEvent,
    RecordedEvent,
    Subject,
    crypto,
)
from eventstore.codec import EncodedEvent, parse_content, small_numbers
from eventstore.schema import events

# Several hundred events, so that every read below is more than a page's worth.
LONG = 250


def write_long_stream(store: EventStore, subject: str) -> None:
    for start in range(0, LONG, 100):
        batch = [NewEvent("memory.stored", {"n": n}) for n in range(start, min(start + 100, LONG))]
        store.append("default", subject, batch, expected_version=start)


def read_watching_fetches(
    store: EventStore,
    subject: str,
    after_each: Callable[[list[list[Any]]], None] = lambda returned: None,
) -> tuple[list[RecordedEvent], list[list[Any]]]:
    """Read the subject's stream, keeping every row list the backend's fetch returned
    (``after_each`` sees them as each statement returns)."""
    fetch = store.backend.fetch
    returned: list[list[Any]] = []

    def watched(conn: sa.Connection, query: sa.Select[Any], params: dict[str, Any]) -> Any:
        rows = fetch(conn, query, params)
        returned.append(rows)
        after_each(returned)
        return rows

    store.backend.fetch = watched  # type: ignore[method-assign]
    try:
        return store.read_stream("default", subject), returned
    finally:
        del store.backend.fetch


def numbers(
    store: EventStore,
    subject: str,
    from_version: int | None = None,
    backwards: bool = False,
    limit: int | None = None,
) -> list[int]:
    found = store.read_stream(
        "default", subject, from_version=from_version, backwards=backwards, limit=limit
    )
    contents = [e.data for e in found]
    assert None not in contents
    return [data["n"] for data in contents if data is not None]


def test_a_long_stream_reads_whole_in_either_direction_and_in_slices(store: EventStore) -> None:
    write_long_stream(store, "long")
    assert numbers(store, "long") == list(range(LONG))
    assert numbers(store, "long", backwards=True) == list(reversed(range(LONG)))
    assert numbers(store, "long", from_version=121, limit=150) == list(range(120, 250))
    assert numbers(store, "long", from_version=130, backwards=True, limit=101) == list(
        range(129, 28, -1)
    )
    assert [e.version for e in store.read_stream("default", "long")] == list(range(1, LONG + 1))


def test_every_read_path_returns_the_events_the_appends_returned(store: EventStore) -> None:
    # Each read path loads rows its own way (on PostgreSQL the recorded time
    # arrives in the server's binary form); all must rebuild the same events.
    appended = []
    for n, subject in enumerate(["ann", "bob", "ann", "cyd"]):
        batch = [NewEvent("memory.stored", {"n": n, "i": i}, {"by": "test"}) for i in range(3)]
        appended += store.append("default", subject, batch)
    by_subject = {
        subject: [
            e
            for e in appended
            if e.stream.subject_key == store.codec.subject_key("default", subject)
        ]
        for subject in ("ann", "bob", "cyd")
    }
    for subject, expected in by_subject.items():
        assert store.read_stream("default", subject) == expected
    # On PostgreSQL another transaction of this database (autovacuum's ANALYZE
    # takes an xid) can hold delivery back a moment; wait rather than read short.
    deadline = time.monotonic() + 30
    while store.count_after(START) < len(appended) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.read_all(limit=100).events == appended
    assert store.get_events([e.event_id for e in appended]) == appended
    assert len({e.recorded_at for e in appended}) == 4  # one time per append, not one per event


def test_a_read_that_fails_half_way_leaves_the_store_readable(store: EventStore) -> None:
    write_long_stream(store, "damaged")
    write_long_stream(store, "intact")
    damaged = store.read_stream("default", "damaged")[200]
    with store.backend.engine.begin() as conn:
        conn.execute(
            events.update()
            .where(events.c.position == damaged.position)
            .values(payload=sa.func.substr(events.c.payload, 2))
        )
    # More reads than the store keeps connections: a connection handed back
    # in the middle of a result would break one of the reads that follow.
    for _ in range(12):
        with pytest.raises(IntegrityViolationError):
            store.read_stream("default", "damaged")
        assert numbers(store, "intact") == list(range(LONG))


@pytest.mark.parametrize(
    "content",
    [
        {"n": 1, "x": 0.5, "s": "12345678901234567890"[:19]},
        {"n": 2**64 - 1},
        {"s": "1" * 25},
        {"n": 2**70},
        {"x": 1e-5, "s": "1" * 25},
    ],
)
def test_every_plaintext_is_written_in_one_form(
    store: EventStore, content: dict[str, object]
) -> None:
    encoded = store.codec.encode(NewEvent("memory.stored", content))
    assert encoded.plaintext() == b"[" + encoded.payload + b"," + encoded.metadata + b"]"
    assert parse_content(encoded.plaintext()) == (content, {})
    [event] = store.append("default", "numbers", [NewEvent("memory.stored", content)])
    assert store.read_stream("default", "numbers")[-1].data == content == event.data


def test_a_large_integer_in_the_metadata_reads_back_exactly(store: EventStore) -> None:
    event = NewEvent("memory.stored", {"n": 1}, metadata={"trace": 2**70})
    [appended] = store.append("default", "meta", [event])
    [read] = store.read_stream("default", "meta")
    assert read.metadata == {"trace": 2**70} == appended.metadata
    assert read.metadata is not None
    assert type(read.metadata["trace"]) is int


@pytest.mark.parametrize("value", [7, 2**70, -(2**80), -(2**63), -(2**63) - 1, 2**64 - 1, 2**64])
def test_plaintexts_of_the_older_form_with_a_leading_space_read_the_same(value: int) -> None:
    payload = b'{"n":%d}' % value
    current = EncodedEvent(uuid.uuid4(), "t", 1, payload, b"{}", caller_id=False).plaintext()
    older = b" " + current  # what earlier releases wrote when every number fit in 64 bits
    for plaintext in (current, older):
        data, metadata = parse_content(plaintext)
        assert data == {"n": value}
        assert type(data["n"]) is int
        assert metadata == {}
    if not -(2**63) <= value < 2**64:  # what orjson would read back as a float
        assert not small_numbers(payload)
    assert small_numbers(b'{"n":%d}' % 7)


def test_a_stored_row_of_the_older_form_reads_back(store: EventStore) -> None:
    """Reader tolerance on a real row: its ciphertext re-sealed as older releases sealed it."""
    [event] = store.append("default", "old", [NewEvent("memory.stored", {"n": 5}, {"m": 1})])
    with store.transaction() as tx:
        stream = tx.lock_stream(Subject("default", "old"))
        assert stream is not None
        cipher = crypto.AeadKey(store.codec.unwrap(stream.wrapped_key))  # type: ignore[arg-type]
        aad = crypto.event_aad(event.event_id, event.stream.stream_id, event.version)
        older = cipher.encrypt(b' [{"n":5},{"m":1}]', aad)
        tx.connection.execute(
            events.update().where(events.c.event_id == event.event_id).values(payload=older)
        )
    [read] = store.read_stream("default", "old")
    assert (read.data, read.metadata) == ({"n": 5}, {"m": 1})
    [by_id] = store.get_events([event.event_id])
    assert by_id.data == {"n": 5}


def test_a_key_destroyed_between_the_events_and_their_keys_reads_back_as_erased(
    store: EventStore,
) -> None:
    # A read fetches the events, then their streams' keys.  On PostgreSQL the
    # two statements see two snapshots: a key destroyed in that gap must leave
    # the events unreadable, as if it had gone before the read.  SQLite reads
    # both in one snapshot, taken before the key went: the events as they were.
    write_long_stream(store, "racing")

    def destroy_after_the_first(returned: list[list[Any]]) -> None:
        if len(returned) == 1:  # right after the read's first statement
            assert store.destroy_data_key("default", "racing") is not None

    found, _ = read_watching_fetches(store, "racing", destroy_after_the_first)
    assert len(found) == LONG
    if store.backend_name == "postgresql":
        assert {e.erasure for e in found} == {Erasure.KEY_DESTROYED}
        assert {e.data is None and e.metadata is None for e in found} == {True}
    else:
        assert [e.data for e in found] == [{"n": n} for n in range(LONG)]
    assert {e.erasure for e in store.read_stream("default", "racing")} == {Erasure.KEY_DESTROYED}


def test_a_read_lets_each_row_go_once_its_event_is_built(store: EventStore) -> None:
    # A large read must not hold its rows (ciphertexts and all) beside its events:
    # the decoder consumes the list the statement returned, and the events keep
    # the statement's order.
    write_long_stream(store, "consumed")
    found, (event_rows, stream_rows) = read_watching_fetches(store, "consumed")
    assert event_rows == []
    assert len(stream_rows) == 1
    assert [e.version for e in found] == list(range(1, LONG + 1))
