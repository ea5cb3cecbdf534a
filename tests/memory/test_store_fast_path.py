"""store() on the one-statement path, against heads another client moved, on both backends.

Without a request id, store() offers the event and its graph rows (the
memory_events row and the node, sealed under the subject's key) to one
conditional write at the head this process remembers (eventstore.heads,
eventstore.companions).  Two clients on one database stand for two
processes.  Whatever the other one does (append, forget, destroy the key),
the database decides: a failed condition writes neither the event nor any
graph row, and the store then takes the locked path, which must leave the
same rows the one-statement path would have.
"""

from __future__ import annotations

import re
import threading
import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from eventstore import (
    CompanionRows,
    ConflictError,
    KeyUnavailableError,
    NewEvent,
    PendingEvent,
    SubjectCipher,
)
from eventstore.schema import events, streams
from oblivio import MemoryClient
from projections import events as ev
from projections.storage.tables import memory_events, node_directory, nodes
from tests.memory._support import log_ids, statements, stream
from tests.memory.conftest import Opener

# The locked path projects through SQLAlchemy (GraphStore.add_stored); the
# one-statement path hands its graph rows to the log, which sends them on
# the driver's cursor together with the append.
GRAPH_INSERT = re.compile(r"\bINSERT INTO memory_(events|nodes)\b", re.I)


def took_locked_path(seen: list[str]) -> bool:
    return any(GRAPH_INSERT.search(s) for s in seen)


def graph_rows(client: MemoryClient, user: str | None = None) -> dict[str, int]:
    """Graph rows of the client's namespace (or of one user's streams), by table.

    The node directory has no stream column: its entries are counted through
    the live (not tombstoned) events they name, since erasure leaves them.
    """
    ctx = client.context
    ids = sa.select(streams.c.stream_id).where(streams.c.namespace == ctx.namespace)
    if user is not None:
        ids = ids.where(streams.c.subject_key == ctx.store.codec.subject_key(ctx.namespace, user))
    event_ids = sa.select(events.c.event_id).where(
        events.c.stream_id.in_(ids), events.c.payload.is_not(None)
    )
    counts = {
        table.name: sa.select(sa.func.count()).where(table.c.stream_id.in_(ids))
        for table in (memory_events, nodes)
    }
    counts[node_directory.name] = sa.select(sa.func.count()).where(
        node_directory.c.event_id.in_(event_ids)
    )
    with ctx.store.backend.engine.connect() as conn:
        return {name: conn.execute(query).scalar_one() for name, query in counts.items()}


def assert_consistent(client: MemoryClient, user: str) -> None:
    """Every event of the user has exactly its node, the chain verifies, replay = live."""
    events = stream(client, user)
    assert [e.version for e in events] == list(range(1, len(events) + 1))
    for event in events:
        [node] = client.get_event_nodes(event.event_id, user_id=user)
        assert event.data is not None
        assert node.content == event.data["content"]
    assert set(graph_rows(client, user).values()) == {len(events)}
    assert client.context.store.verify(client.context.namespace, user).ok
    for name, (live, replayed) in client.replay_comparison(user_id=user).items():
        assert live == replayed, f"{name}: replay differs from live"


@pytest.fixture
def other(reopen: Opener) -> MemoryClient:
    """A second client on the same store: another process, with heads of its own."""
    return reopen()


def test_a_store_at_a_remembered_head_needs_no_transaction(memory: MemoryClient) -> None:
    memory.store("Alice lives in Berlin", user_id="alice")  # creates the stream, remembers it
    with statements(memory) as seen:
        event_id = memory.store("Alice moved to Paris", user_id="alice")
    assert seen == []  # one statement on the driver's cursor (SQLite: in BEGIN IMMEDIATE)
    [node] = memory.get_event_nodes(event_id, user_id="alice")
    assert node.content == "Alice moved to Paris"
    assert_consistent(memory, "alice")


def test_both_paths_write_the_same_graph_rows(memory: MemoryClient) -> None:
    fields: dict[str, Any] = {
        "scope": "project",
        "session_id": "trip-7",
        "source_type": "agent_inferred",
        "node_type": "preference",
        "meta": {"source": "chat", "confidence": 0.7},
    }
    memory.store("warm-up", user_id="alice")
    memory.store("warm-up", user_id="bob")
    with statements(memory) as fast_statements:
        fast = memory.store("Window seats, please", user_id="alice", **fields)
    with statements(memory) as locked_statements:
        locked = memory.store(
            "Window seats, please", user_id="bob", request_id=uuid.uuid4(), **fields
        )
    assert not took_locked_path(fast_statements)
    assert took_locked_path(locked_statements)

    [a] = memory.get_event_nodes(fast, user_id="alice")
    [b] = memory.get_event_nodes(locked, user_id="bob")
    ignore = {"id", "event_id", "created_at", "updated_at"}
    assert {k: v for k, v in vars(a).items() if k not in ignore} == {
        k: v for k, v in vars(b).items() if k not in ignore
    }
    assert a.id == ev.node_id(fast, 0)  # deterministic, as replay derives it
    for user in ("alice", "bob"):
        assert_consistent(memory, user)


def test_a_head_moved_by_another_client_sends_the_store_down_the_locked_path(
    memory: MemoryClient, other: MemoryClient
) -> None:
    memory.store("one", user_id="alice")  # memory remembers version 1
    other.store("two", user_id="alice")  # other moves the head to 2
    with statements(memory) as seen:
        third = memory.store("three", user_id="alice")
    assert took_locked_path(seen)
    with statements(memory) as seen:
        memory.store("four", user_id="alice")  # the locked path left the head remembered
    assert seen == []
    assert [e.version for e in stream(memory, "alice") if e.event_id == third] == [3]
    assert [n.content for n in memory.get_event_nodes(third, user_id="alice")] == ["three"]
    assert_consistent(memory, "alice")


def _stored_event(client: MemoryClient, user: str, content: str) -> NewEvent:
    data = {
        "user_id": user,
        "content": content,
        "scope": "personal",
        "role": "user",
        "session_id": None,
        "source_type": "user_stated",
        "node_type": "fact",
        "meta": {},
    }
    return NewEvent(ev.STORED, data)


def test_a_failed_condition_writes_neither_the_event_nor_any_graph_row(
    memory: MemoryClient, other: MemoryClient
) -> None:
    memory.store("one", user_id="alice")
    other.store("two", user_id="alice")
    log, graph = log_ids(memory), graph_rows(memory)
    ctx = memory.context
    event = _stored_event(memory, "alice", "late")
    assert ctx.store.try_append(ctx.namespace, "alice", [event], ctx.graph.stored_rows) is None
    assert (log_ids(memory), graph_rows(memory)) == (log, graph)


def test_a_failing_companion_row_takes_the_event_with_it(memory: MemoryClient) -> None:
    first = memory.store("one", user_id="alice")
    [existing] = memory.get_event_nodes(first, user_id="alice")
    ctx = memory.context

    def clashing(cipher: SubjectCipher, events: Any) -> list[CompanionRows]:
        rows = ctx.graph.stored_rows(cipher, events)
        [entries] = [r for r in rows if r.table is node_directory]
        entries.rows[0]["node_id"] = existing.id  # the directory's key: the insert must fail
        return rows

    log, graph = log_ids(memory), graph_rows(memory)
    event = _stored_event(memory, "alice", "clash")
    with pytest.raises(ConflictError):
        ctx.store.try_append(ctx.namespace, "alice", [event], clashing)
    assert (log_ids(memory), graph_rows(memory)) == (log, graph)
    memory.store("two", user_id="alice")  # the head is still where it was
    assert_consistent(memory, "alice")


def test_companion_rows_must_name_every_column(memory: MemoryClient) -> None:
    memory.store("one", user_id="alice")
    ctx = memory.context

    def partial(cipher: SubjectCipher, events: Any) -> list[CompanionRows]:
        [pending] = events
        assert isinstance(pending, PendingEvent)
        return [CompanionRows(memory_events, [{"stream_id": cipher.stream_id}])]

    log = log_ids(memory)
    with pytest.raises(ValueError, match="must name exactly its columns"):
        ctx.store.try_append(ctx.namespace, "alice", [_stored_event(memory, "alice", "x")], partial)
    assert log_ids(memory) == log


def test_no_store_lands_in_a_generation_another_client_forgot(
    memory: MemoryClient, other: MemoryClient
) -> None:
    [old] = [memory.store("old life", user_id="alice")]
    old_stream = stream(memory, "alice")[0].stream.stream_id
    other.forget("alice", wait=True)
    new = memory.store("new life", user_id="alice")
    [event] = stream(memory, "alice")
    assert (event.event_id, event.version, event.stream.generation) == (new, 1, 2)
    assert memory.get_event_nodes(old) == []
    with memory.context.store.backend.engine.connect() as conn:
        left = conn.execute(sa.select(nodes).where(nodes.c.stream_id == old_stream)).all()
    assert left == []
    assert_consistent(memory, "alice")


def test_no_store_lands_under_a_key_another_client_destroyed(
    memory: MemoryClient, other: MemoryClient
) -> None:
    memory.store("before", user_id="alice")  # memory holds the wrapped key
    assert other.context.store.destroy_data_key(other.context.namespace, "alice") is not None
    log, graph = log_ids(memory), graph_rows(memory)
    with pytest.raises(KeyUnavailableError):
        memory.store("after", user_id="alice")
    assert (log_ids(memory), graph_rows(memory)) == (log, graph)


def test_two_clients_storing_to_one_subject_each_land_once_with_their_node(
    memory: MemoryClient, other: MemoryClient
) -> None:
    per_client = 15
    start = threading.Barrier(2)
    errors: list[BaseException] = []
    written: dict[str, list[uuid.UUID]] = {"memory": [], "other": []}

    def write(name: str, client: MemoryClient) -> None:
        try:
            start.wait(timeout=30)
            for n in range(per_client):
                written[name].append(client.store(f"{name} {n}", user_id="alice"))
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [
        threading.Thread(target=write, args=item) for item in (("memory", memory), ("other", other))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    events = stream(memory, "alice")
    assert sorted(e.event_id for e in events) == sorted(written["memory"] + written["other"])
    assert len(events) == 2 * per_client
    assert_consistent(memory, "alice")


def test_stores_racing_a_forget_leave_nothing_in_the_erased_generation(
    memory: MemoryClient, other: MemoryClient
) -> None:
    memory.store("seed", user_id="alice")
    first_stream = stream(memory, "alice")[0].stream.stream_id
    forgotten, errors = threading.Event(), []

    def write() -> None:
        try:
            for n in range(40):
                if n == 10:
                    forgotten.wait(timeout=60)  # some stores after the forget, too
                memory.store(f"note {n}", user_id="alice")
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    writer = threading.Thread(target=write)
    writer.start()
    other.forget("alice", wait=True)
    forgotten.set()
    writer.join(timeout=120)
    assert errors == []
    with memory.context.store.backend.engine.connect() as conn:
        for table in (memory_events, nodes):
            query = sa.select(sa.func.count()).where(table.c.stream_id == first_stream)
            assert conn.execute(query).scalar_one() == 0, f"{table.name} of the erased generation"
        payloads = conn.execute(
            sa.select(sa.func.count()).where(
                events.c.stream_id == first_stream, events.c.payload.is_not(None)
            )
        ).scalar_one()
    assert payloads == 0
    [current] = {e.stream.stream_id for e in stream(memory, "alice")}
    assert current != first_stream
    assert_consistent(memory, "alice")
