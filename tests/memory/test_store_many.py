"""store_many: a person's memories in one transaction, through store()'s own path.

The batch is validated whole before anything is written, appended under one
lock in one append, and its graph rows written in one statement per table:
the statements a batch sends do not grow with its size.  Each memory keeps
store()'s rules: request-id idempotency, the restriction of processing, and
the same event and nodes a store() of it leaves.
"""

from __future__ import annotations

import uuid

import pytest

from eventstore.errors import InvalidInputError, SubjectRestrictedError
from oblivio import MemoryClient
from oblivio.errors import IdempotencyConflictError
from tests.memory._support import log_ids, statements


def test_the_batch_is_stored_as_store_stores_each_memory(memory: MemoryClient) -> None:
    one = memory.store("Alice lives in Berlin", user_id="alice", scope="project", meta={"k": 1})
    [many] = memory.store_many(
        [{"content": "Alice lives in Berlin", "scope": "project", "meta": {"k": 1}}],
        user_id="alice",
    )
    single, batched = memory.get_event(one, user_id="alice"), memory.get_event(many.event_id)
    assert single is not None
    assert batched is not None
    assert (batched.content, batched.scope, batched.meta) == (
        single.content,
        single.scope,
        single.meta,
    )
    [node] = memory.get_event_nodes(many.event_id, user_id="alice")
    assert (node.id,) == many.node_ids
    assert node.content == "Alice lives in Berlin"


def test_every_memory_is_stored_in_order_with_its_own_options(memory: MemoryClient) -> None:
    batch = [
        {"content": "Alice lives in Berlin", "occurred_at": "2021-03-01T00:00:00+00:00"},
        {"content": "Alice plays chess", "session_id": "s-1", "node_type": "preference"},
        {"content": "The assistant suggested a club", "role": "assistant"},
    ]
    stored = memory.store_many(batch, user_id="alice")
    events = memory.get_events(user_id="alice")
    assert [e.id for e in events] == [s.event_id for s in stored]
    assert [e.content for e in events] == [m["content"] for m in batch]
    assert events[0].occurred_at.year == 2021
    assert events[1].session_id == "s-1"
    assert events[2].role.value == "assistant"
    for item in stored:
        assert [n.id for n in memory.get_event_nodes(item.event_id)] == list(item.node_ids)


@pytest.mark.parametrize(
    "bad",
    [
        {"content": ""},
        {"content": "fine", "scope": "nowhere"},
        {"content": "fine", "colour": "blue"},
        {"content": "fine", "occurred_at": "2021-03-01T00:00:00"},  # no time zone
        "just text",
    ],
)
def test_one_bad_memory_writes_nothing(memory: MemoryClient, bad: object) -> None:
    before = log_ids(memory)
    batch = [{"content": "Alice lives in Berlin"}, bad]
    with pytest.raises(InvalidInputError, match="memory 1"):
        memory.store_many(batch, user_id="alice")  # type: ignore[list-item]
    assert log_ids(memory) == before


@pytest.mark.parametrize("memories", [[], {"content": "a mapping, not a list"}, "text"])
def test_a_batch_is_a_nonempty_list(memory: MemoryClient, memories: object) -> None:
    with pytest.raises(InvalidInputError):
        memory.store_many(memories, user_id="alice")  # type: ignore[arg-type]


def test_request_ids_make_each_memory_idempotent(memory: MemoryClient) -> None:
    keyed = [{"content": f"Alice fact {n}", "request_id": uuid.uuid4()} for n in range(3)]
    first = memory.store_many(keyed, user_id="alice")
    written = log_ids(memory)
    assert memory.store_many(keyed, user_id="alice") == first
    assert log_ids(memory) == written
    # A retry that adds memories stores only the new ones, after the earlier.
    extended = [*keyed, {"content": "Alice fact 3"}]
    again = memory.store_many(extended, user_id="alice")
    assert again[:3] == first
    assert log_ids(memory) == [*written, again[3].event_id]


def test_a_request_id_reused_for_other_content_writes_nothing(memory: MemoryClient) -> None:
    key = uuid.uuid4()
    memory.store("Alice lives in Berlin", user_id="alice", request_id=key)
    written = log_ids(memory)
    batch = [{"content": "new"}, {"content": "Alice lives in Paris", "request_id": key}]
    with pytest.raises(IdempotencyConflictError):
        memory.store_many(batch, user_id="alice")
    assert log_ids(memory) == written


def test_the_same_request_id_twice_in_a_batch_is_refused(memory: MemoryClient) -> None:
    key = uuid.uuid4()
    batch = [{"content": "a", "request_id": key}, {"content": "b", "request_id": key}]
    with pytest.raises(InvalidInputError):
        memory.store_many(batch, user_id="alice")
    assert memory.get_events(user_id="alice") == []


def test_a_restricted_person_gets_nothing_stored(memory: MemoryClient) -> None:
    memory.store("Alice lives in Berlin", user_id="alice")
    memory.restrict("alice", ground="art18-1-a", reference="T-1")
    written = log_ids(memory)
    with pytest.raises(SubjectRestrictedError):
        memory.store_many([{"content": "Alice moved"}], user_id="alice")
    assert log_ids(memory) == written
    memory.lift_restriction("alice", reference="T-1")
    assert len(memory.store_many([{"content": "Alice moved"}], user_id="alice")) == 1


def test_the_statements_of_a_batch_do_not_grow_with_it(memory: MemoryClient) -> None:
    memory.store("Alice lives in Berlin", user_id="alice")  # the stream exists
    counts = []
    for size in (2, 40):
        with statements(memory) as seen:
            memory.store_many(
                [{"content": f"Alice fact {n}"} for n in range(size)], user_id="alice"
            )
        counts.append(len(seen))
    assert counts[0] == counts[1]


def test_replay_equals_the_projection_after_a_batch(memory: MemoryClient) -> None:
    memory.store("Alice lives in Berlin", user_id="alice")
    memory.store_many([{"content": f"Alice fact {n}"} for n in range(20)], user_id="alice")
    for name, (live, replayed) in memory.replay_comparison(user_id="alice").items():
        assert live == replayed, name
