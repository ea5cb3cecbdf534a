"""POST /v1/events answers with the derived node ids without reading them back.

Fresh stores take the ids from the extraction (a function of the event);
a replayed store (same request id) answers with the nodes of the earlier
append.  Both must agree with what the store holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import pytest
from fastapi.dependencies.models import Dependant
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from oblivio.http.auth import KeyedRoute
from tests.http.conftest import World


def stored_node_ids(world: World, event_id: str) -> list[str]:
    response = world.client.get(f"/v1/events/{event_id}/nodes", headers=world.headers("user"))
    assert response.status_code == 200, response.text
    return [node["id"] for node in response.json()]


def test_the_answer_names_the_nodes_the_store_holds(world: World) -> None:
    response = world.client.post(
        "/v1/events", json={"content": "I moved to Lisbon"}, headers=world.headers("user")
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["node_ids"], "a stored memory derives at least one node"
    assert body["node_ids"] == stored_node_ids(world, body["event_id"])


def test_a_replayed_store_answers_with_the_earlier_nodes(world: World) -> None:
    request = {"content": "I moved to Porto", "request_id": str(uuid.uuid4())}
    first = world.client.post("/v1/events", json=request, headers=world.headers("user"))
    again = world.client.post("/v1/events", json=request, headers=world.headers("user"))
    assert again.status_code == 201, again.text
    assert again.json() == first.json()
    assert again.json()["node_ids"] == stored_node_ids(world, first.json()["event_id"])


def test_a_store_hands_off_to_the_thread_pool_once(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the store blocks: a key the cache holds is admitted on the event loop, and
    the answer is written in the store's own thread.  Each further hand-off to the
    thread pool and back was a fixed cost of every request on the event loop."""
    headers = world.headers("user")
    first = world.client.post("/v1/events", json={"content": "I moved to Lisbon"}, headers=headers)
    assert first.status_code == 201, first.text  # the key is in the cache from here on
    handed_off: list[str] = []
    hand_off = anyio.to_thread.run_sync

    async def counted(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        handed_off.append(repr(func))
        return await hand_off(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    again = world.client.post("/v1/events", json={"content": "I moved to Porto"}, headers=headers)
    assert again.status_code == 201, again.text
    assert len(handed_off) == 1, handed_off


def solved_calls(dependant: Dependant) -> set[Any]:
    """Every dependency FastAPI solves for ``dependant``'s requests (each once: cached)."""
    calls: set[Any] = set()
    for sub in dependant.dependencies:
        calls |= {sub.call} | solved_calls(sub)
    return calls


def test_a_store_solves_one_dependency_for_its_key(world: World) -> None:
    """The key, its tenant and its admission are the route's one dependency: FastAPI
    solves every dependency of every request on the event loop, and a chain of them
    (bearer, principal, tenant, admission) was a sixth of the loop's time on a store."""
    app = world.client.app
    routed: list[Any] = []

    async def recording(scope: Scope, receive: Receive, send: Send) -> None:
        await app(scope, receive, send)
        routed.append(scope["route"])  # the route the app matched, as the request log reads it

    client = TestClient(recording)
    stored = client.post("/v1/events", json={"content": "I moved"}, headers=world.headers("user"))
    assert stored.status_code == 201, stored.text
    calls = solved_calls(routed[0].dependant)
    assert len(calls) == 1, calls
    assert isinstance(calls.pop(), KeyedRoute)
