"""POST /v1/events:batch: several memories of one user, all stored or none.

The route is ``store_many`` over HTTP: one answer per memory in request order,
each naming the nodes the store holds; one invalid memory is a 422 and writes
nothing; a user key stores only for its own user.
"""

from __future__ import annotations

import uuid

from oblivio.memory import queries
from tests.http.conftest import ALICE, World

BATCH = "/v1/events:batch"


def test_each_memory_is_answered_with_the_nodes_the_store_holds(world: World) -> None:
    memories = [
        {"content": "I moved to Lisbon", "occurred_at": "2022-05-01T09:00:00Z"},
        {"content": "I work at a ceramics studio", "scope": "project", "meta": {"source": "chat"}},
    ]
    response = world.client.post(BATCH, json={"memories": memories}, headers=world.headers("user"))
    assert response.status_code == 201, response.text
    results = response.json()["results"]
    events = queries.get_events(world.ctx, user_id=ALICE)
    assert [r["event_id"] for r in results] == [str(e.id) for e in events]
    assert [e.content for e in events] == [m["content"] for m in memories]
    assert events[0].occurred_at.year == 2022
    for result in results:
        nodes = queries.get_event_nodes(world.ctx, result["event_id"], user_id=ALICE)
        assert result["node_ids"] == [str(n.id) for n in nodes]


def test_one_invalid_memory_writes_nothing(world: World) -> None:
    memories = [{"content": "I moved to Lisbon"}, {"content": "fine", "scope": "nowhere"}]
    response = world.client.post(BATCH, json={"memories": memories}, headers=world.headers("user"))
    assert response.status_code == 422, response.text
    assert queries.get_events(world.ctx, user_id=ALICE) == []


def test_an_empty_batch_is_refused(world: World) -> None:
    response = world.client.post(BATCH, json={"memories": []}, headers=world.headers("user"))
    assert response.status_code == 422, response.text


def test_a_retry_with_request_ids_answers_the_same(world: World) -> None:
    memories = [{"content": f"I like tea {n}", "request_id": str(uuid.uuid4())} for n in range(3)]
    first = world.client.post(BATCH, json={"memories": memories}, headers=world.headers("user"))
    again = world.client.post(BATCH, json={"memories": memories}, headers=world.headers("user"))
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert len(queries.get_events(world.ctx, user_id=ALICE)) == 3


def test_a_user_key_stores_for_its_own_user_only(world: World) -> None:
    body = {"memories": [{"content": "I like tea"}], "user_id": "bob"}
    response = world.client.post(BATCH, json=body, headers=world.headers("user"))
    assert response.status_code == 404, response.text  # as for any other user's data
    assert queries.get_events(world.ctx, user_id="bob") == []
    operator = world.client.post(BATCH, json=body, headers=world.headers("operator"))
    assert operator.status_code == 201, operator.text
    assert [e.content for e in queries.get_events(world.ctx, user_id="bob")] == ["I like tea"]
