"""Backend contract: every test runs against SQLite and PostgreSQL alike."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import sqlalchemy as sa

from eventstore import (
    ANY,
    START,
    AuditEntry,
    DuplicateEventError,
    Erasure,
    EventErasedError,
    EventStore,
    InvalidEncodingError,
    InvalidInputError,
    KeyUnavailableError,
    MalformedIdError,
    NewEvent,
    PayloadTooLargeError,
    Subject,
    WrongExpectedVersionError,
)
from eventstore.schema import events
from tests.conftest import WITH_CITUS, url_of_backend
from tests.eventstore._support import forget_generation

# The log's contract holds on the Citus tier too (the ``store`` fixture takes this).
any_database_url = pytest.fixture(params=WITH_CITUS)(url_of_backend)

HORIZON_WAIT_SECONDS = 30


def stored(content: str, **kwargs: object) -> NewEvent:
    return NewEvent("memory.stored", {"content": content}, **kwargs)  # type: ignore[arg-type]


def count_events(store: EventStore) -> int:
    with store.backend.read_connection() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(events)).scalar_one())


def test_append_assigns_consecutive_versions_and_reads_back(store: EventStore) -> None:
    first = store.append("default", "alice", [stored("a"), stored("b")], expected_version=0)
    second = store.append("default", "alice", [stored("c")], expected_version=2)
    assert [e.version for e in first + second] == [1, 2, 3]
    assert [e.data for e in store.read_stream("default", "alice")] == [
        {"content": "a"},
        {"content": "b"},
        {"content": "c"},
    ]
    backwards = store.read_stream("default", "alice", backwards=True, limit=2)
    assert [e.version for e in backwards] == [3, 2]
    assert [e.version for e in store.read_stream("default", "alice", from_version=2)] == [2, 3]
    head = store.head("default", "alice")
    assert head is not None
    assert head.version == 3
    assert head.chain_hash == second[0].chain_hash


def test_streams_are_separate_per_namespace_and_subject(store: EventStore) -> None:
    store.append("default", "alice", [stored("a")])
    store.append("default", "bob", [stored("b")])
    store.append("other", "alice", [stored("c")])
    assert [e.data for e in store.read_stream("default", "alice")] == [{"content": "a"}]
    assert [e.data for e in store.read_stream("other", "alice")] == [{"content": "c"}]
    assert store.read_stream("default", "carol") == []


def test_wrong_expected_version_writes_nothing(store: EventStore) -> None:
    store.append("default", "alice", [stored("a")])
    with pytest.raises(WrongExpectedVersionError) as caught:
        store.append("default", "alice", [stored("b")], expected_version=0)
    assert (caught.value.expected, caught.value.actual) == (0, 1)
    assert count_events(store) == 1


def test_reappending_the_same_event_is_a_no_op_returning_the_original(store: EventStore) -> None:
    event_id = uuid.uuid4()
    original = store.append("default", "alice", [stored("a", event_id=event_id)])
    again = store.append("default", "alice", [stored("a", event_id=event_id)], expected_version=0)
    assert again == original
    assert count_events(store) == 1


@pytest.mark.parametrize(
    "changed",
    [
        stored("different"),
        NewEvent("memory.other", {"content": "a"}),
        NewEvent("memory.stored", {"content": "a"}, metadata={"source": "erp"}),
    ],
)
def test_reappending_an_event_id_with_other_content_conflicts(
    store: EventStore, changed: NewEvent
) -> None:
    event_id = uuid.uuid4()
    store.append("default", "alice", [stored("a", event_id=event_id)])
    retry = NewEvent(changed.type, changed.data, changed.metadata, event_id=event_id)
    with pytest.raises(DuplicateEventError):
        store.append("default", "alice", [retry])
    assert count_events(store) == 1


def test_an_event_id_is_unique_across_streams(store: EventStore) -> None:
    event_id = uuid.uuid4()
    store.append("default", "alice", [stored("a", event_id=event_id)])
    with pytest.raises(DuplicateEventError):
        store.append("default", "bob", [stored("a", event_id=event_id)])


def test_partially_replayed_batch_conflicts_and_writes_nothing(store: EventStore) -> None:
    event_id = uuid.uuid4()
    store.append("default", "alice", [stored("a", event_id=event_id)])
    with pytest.raises(DuplicateEventError):
        store.append("default", "alice", [stored("a", event_id=event_id), stored("b")])
    assert count_events(store) == 1


@pytest.mark.parametrize(
    ("namespace", "subject", "event", "error"),
    [
        ("Bad Namespace", "alice", stored("a"), MalformedIdError),
        ("$system", "alice", stored("a"), MalformedIdError),
        ("default", "", stored("a"), MalformedIdError),
        ("default", "x" * 300, stored("a"), MalformedIdError),
        ("default", "al\x00ice", stored("a"), MalformedIdError),
        ("default", "alice\x1f", stored("a"), MalformedIdError),  # the last C0 control
        ("default", "\x7falice", stored("a"), MalformedIdError),  # DEL
        ("default", "alice", NewEvent("bad type!", {}), MalformedIdError),
        ("default", "alice", stored("\ud800 lone surrogate"), InvalidEncodingError),
        ("default", "alice", NewEvent("memory.stored", {"x": float("nan")}), InvalidInputError),
        ("default", "alice", NewEvent("memory.stored", {"x": object()}), InvalidInputError),
        ("default", "alice", NewEvent("memory.stored", ["not", "a", "dict"]), InvalidInputError),  # type: ignore[arg-type]
        ("default", "alice", stored("a" * (1024 * 1024)), PayloadTooLargeError),
    ],
)
def test_bad_input_gets_a_typed_error_and_writes_nothing(
    store: EventStore, namespace: str, subject: str, event: NewEvent, error: type[Exception]
) -> None:
    with pytest.raises(error):
        store.append(namespace, subject, [stored("fine"), event])
    assert count_events(store) == 0
    assert issubclass(error, ValueError)


def test_bad_expected_version_and_empty_batches_are_refused(store: EventStore) -> None:
    with pytest.raises(InvalidInputError):
        store.append("default", "alice", [], expected_version=ANY)
    with pytest.raises(InvalidInputError):
        store.append("default", "alice", [stored("a")], expected_version=-1)
    same = uuid.uuid4()
    with pytest.raises(InvalidInputError):
        store.append("default", "alice", [stored("a", event_id=same), stored("a", event_id=same)])
    assert count_events(store) == 0


def test_read_all_pages_through_the_global_order(store: EventStore) -> None:
    written = []
    for i in range(7):
        written += store.append("default", f"user-{i % 3}", [stored(str(i))])
    seen = []
    cursor = START
    deadline = time.monotonic() + HORIZON_WAIT_SECONDS
    while len(seen) < len(written) and time.monotonic() < deadline:
        # On PostgreSQL another transaction of this database (autovacuum's
        # ANALYZE takes an xid) can hold delivery back a moment; wait, not fail.
        page = store.read_all(cursor, limit=3)
        if not page.events:
            time.sleep(0.05)
        seen += page.events
        cursor = page.next_cursor
    assert [e.event_id for e in seen] == [e.event_id for e in written]
    assert store.read_all(cursor).events == []


def test_subscription_follows_new_events(store: EventStore) -> None:
    store.append("default", "alice", [stored("before")])
    stop = threading.Event()
    received: list[str] = []

    def follow() -> None:
        for event in store.subscribe(poll_interval=0.01, stop=stop):
            received.append(event.data["content"] if event.data else "")
            if len(received) == 3:
                stop.set()

    thread = threading.Thread(target=follow)
    thread.start()
    store.append("default", "bob", [stored("after-1"), stored("after-2")])
    thread.join(timeout=10)
    stop.set()
    assert received == ["before", "after-1", "after-2"]


def test_tombstoned_events_read_as_erased_and_the_chain_still_verifies(store: EventStore) -> None:
    first, _second = store.append("default", "alice", [stored("secret"), stored("kept")])
    request_id = uuid.uuid4()
    tombstones = store.tombstone("default", "alice", [first.event_id], request_id)
    assert [(t.event_id, t.digest, t.chain_hash) for t in tombstones] == [
        (first.event_id, first.digest, first.chain_hash)
    ]
    erased, kept = store.read_stream("default", "alice")
    assert erased.erasure is Erasure.TOMBSTONED
    assert erased.data is None
    assert erased.erasure_request_id == request_id
    assert kept.data == {"content": "kept"}
    assert store.verify().ok
    with pytest.raises(EventErasedError):
        store.append("default", "alice", [stored("secret", event_id=first.event_id)])


def test_destroyed_keys_make_events_read_as_erased_not_as_errors(store: EventStore) -> None:
    store.append("default", "alice", [stored("secret")])
    store.append("default", "bob", [stored("bob's")])
    destruction = store.destroy_data_key("default", "alice")
    assert destruction is not None
    [event] = store.read_stream("default", "alice")
    assert event.erasure is Erasure.KEY_DESTROYED
    assert event.data is None
    assert [e.data for e in store.read_stream("default", "bob")] == [{"content": "bob's"}]
    assert all(
        e.data is None
        for e in store.read_all().events
        if e.stream.namespace == "default" and e.stream.subject_key == event.stream.subject_key
    )
    with pytest.raises(KeyUnavailableError):
        store.append("default", "alice", [stored("more")])
    assert store.verify().ok


def test_closing_a_stream_starts_a_new_generation_with_a_new_key(store: EventStore) -> None:
    [old] = store.append("default", "alice", [stored("old life")])
    forget_generation(store, "default", "alice")
    [new] = store.append("default", "alice", [stored("new life")], expected_version=0)
    assert (new.version, new.stream.generation) == (1, 2)
    assert new.stream.stream_id != old.stream.stream_id
    assert [e.data for e in store.read_stream("default", "alice")] == [{"content": "new life"}]
    assert store.verify("default", "alice").streams_checked == 2
    assert store.verify().ok


def test_transactions_roll_back_as_a_whole(store: EventStore) -> None:
    def append_then_fail() -> None:
        with store.transaction() as tx:
            stream = tx.lock_stream(Subject("default", "alice"), create=True)
            tx.append_locked(stream, [stored("a")])
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        append_then_fail()
    assert count_events(store) == 0
    assert store.head("default", "alice") is None


def test_verify_names_the_first_break(store: EventStore) -> None:
    store.append("default", "alice", [stored("a"), stored("b"), stored("c")])
    with store.backend.write_connection() as conn, conn.begin():
        row = conn.execute(
            sa.select(events.c.position, events.c.payload).where(events.c.version == 2)
        ).one()
        tampered = bytes([row.payload[0] ^ 1]) + row.payload[1:]
        conn.execute(
            events.update().where(events.c.position == row.position).values(payload=tampered)
        )
    report = store.verify()
    assert not report.ok
    assert report.first_break is not None
    assert report.first_break.version == 2
    assert "digest" in report.first_break.reason


def test_audit_entries_are_content_free_and_chained(store: EventStore) -> None:
    subject_ref = store.subject_ref("default", "alice")
    entry = store.append_audit(
        AuditEntry("erasure.requested", subject_ref=subject_ref, counts={"events": 3})
    )
    assert entry.stream.namespace == "$system"
    assert entry.data is not None
    assert entry.data["subject_ref"] == subject_ref
    assert "alice" not in repr(entry.data)
    with pytest.raises(InvalidInputError):
        store.append_audit(AuditEntry("erasure.requested", subject_ref="alice"))
    with pytest.raises(InvalidInputError):
        store.append_audit(AuditEntry("Free text about alice"))
    assert store.verify().ok


def test_positions_are_never_reused(store: EventStore) -> None:
    [last] = store.append("default", "alice", [stored("a")])
    with store.backend.write_connection() as conn, conn.begin():
        conn.execute(events.delete().where(events.c.position == last.position))
    [after] = store.append("default", "bob", [stored("b")])
    assert after.position > last.position


def test_appends_return_the_places_readers_find_them_at(store: EventStore) -> None:
    # The append reports positions without reading them back (SQLite takes
    # them from the last rowid): every path must agree with the log.
    appended = store.append("default", "alice", [stored("new stream, batch"), stored("2")])
    appended += store.append("default", "alice", [stored("known head, one")])
    appended += store.append("default", "alice", [stored("known head, batch"), stored("4")])
    with store.backend.write_connection() as conn, conn.begin():
        conn.execute(events.delete().where(events.c.position == appended[-1].position))
    del appended[-1]  # the rowid of the deleted last row is never handed out again
    appended += store.append("default", "bob", [stored("new stream, one")])
    locked = [stored("locked path", event_id=uuid.uuid4()), stored("6", event_id=uuid.uuid4())]
    appended += store.append("default", "alice", locked, expected_version=5)
    appended += store.append(
        "default", "alice", [stored("locked path, one", event_id=uuid.uuid4())]
    )

    # Streams, not the global log: on PostgreSQL read_all holds back rows
    # behind any transaction still open on the server, even another test's.
    read = [*store.read_stream("default", "alice"), *store.read_stream("default", "bob")]
    assert sorted((e.cursor, e.event_id) for e in appended) == sorted(
        (e.cursor, e.event_id) for e in read
    )
