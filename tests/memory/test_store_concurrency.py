"""store() against heads another client moved, on both backends.

Two clients on one database stand for two processes.  Whatever the other one
does (append, forget, destroy the key), every store lands once, with its
graph rows, at the stream's head, or writes nothing.
"""

from __future__ import annotations

import threading
import uuid

import pytest
import sqlalchemy as sa

from eventstore import (
    KeyUnavailableError,
)
from eventstore.schema import events, streams
from oblivio import MemoryClient
from projections.storage.tables import memory_events, node_directory, nodes
from tests.memory._support import log_ids, stream
from tests.memory.conftest import Opener


def graph_rows(client: MemoryClient, user: str | None = None) -> dict[str, int]:
    """Graph rows of the client's namespace (or of one user's streams), by table.

    The node directory has no stream column: its entries are counted through
    the live (not tombstoned) events they name, since erasure leaves them.
    """
    ctx = client.context
    ids = sa.select(streams.c.stream_id).where(streams.c.namespace == ctx.namespace)
    if user is not None:
        ids = ids.where(streams.c.subject_key == ctx.store.subject_key(ctx.namespace, user))
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
    """A second client on the same store: another process."""
    return reopen()


def test_a_store_after_another_client_moved_the_head_lands_after_it(
    memory: MemoryClient, other: MemoryClient
) -> None:
    memory.store("one", user_id="alice")
    other.store("two", user_id="alice")
    third = memory.store("three", user_id="alice")
    memory.store("four", user_id="alice")
    assert [e.version for e in stream(memory, "alice") if e.event_id == third] == [3]
    assert [n.content for n in memory.get_event_nodes(third, user_id="alice")] == ["three"]
    assert_consistent(memory, "alice")


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


def test_a_forget_in_this_process_drops_the_remembered_key_at_once(reopen: Opener) -> None:
    memory = reopen()
    memory.store("Alice likes tea", user_id="alice")
    store = memory.context.store
    key = store.codec.subject_key(memory.context.namespace, "alice")
    remembered = store.heads.get(memory.context.namespace, key)
    assert remembered is not None
    memory.forget("alice", wait=True)
    assert store.heads.get(memory.context.namespace, key) is None
    memory.store("Alice likes coffee", user_id="alice")  # a new generation, its own key
    fresh = store.heads.get(memory.context.namespace, key)
    assert fresh is not None
    assert fresh.ref.generation == remembered.ref.generation + 1
    assert fresh.wrapped_key.dek_id != remembered.wrapped_key.dek_id
