"""The hot routes served in one thread-pool hand-off (``oblivio.http.direct``).

They must answer exactly as FastAPI's own handler would: the key is checked
before the body is even parsed (401 for a bad key whatever the body holds),
then the body (422, nothing written), then the operation.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import httpx
import pytest
from fastapi.routing import APIRoute

from oblivio.http import memory_routes
from oblivio.http.direct import DIRECT_THREADS, direct_endpoint
from tests.http.conftest import ALICE, HTTP_TIMEOUT, World, log_size, serve_in_thread

#: Routes that must keep the direct shape: a silent fallback to FastAPI's
#: handler would cost the hand-offs this module exists to save.
DIRECT = {("POST", "/v1/events"), ("POST", "/v1/retrieve")}
BAD_BODIES = [b'{"content": ""}', b'{"content": "ok"', b"", b"[1, 2]", b'{"nope": 1}']


def routes() -> dict[tuple[str, str], APIRoute]:
    found = {}
    for route in memory_routes.router.routes:
        assert isinstance(route, APIRoute)
        for method in route.methods:
            found[(method, route.path)] = route
    return found


def test_the_hot_routes_are_served_directly() -> None:
    served = {key for key, route in routes().items() if direct_endpoint(route) is not None}
    assert served >= DIRECT
    # Routes with path, query or header parameters keep FastAPI's handler.
    assert ("GET", "/v1/events") not in served
    assert ("PUT", "/v1/nodes/{node_id}/reinforce") not in served


@pytest.mark.parametrize("principal", ["none", "bad", "revoked"])
def test_a_bad_key_is_refused_before_the_body_is_read(world: World, principal: str) -> None:
    before = log_size(world.ctx)
    for raw in BAD_BODIES:
        headers = world.headers(principal, **{"Content-Type": "application/json"})
        response = world.client.post("/v1/events", content=raw, headers=headers)
        assert response.status_code == 401, (raw, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.headers["content-type"] == "application/problem+json"
    assert log_size(world.ctx) == before


def test_an_auditor_is_refused_before_the_body_is_read(world: World) -> None:
    headers = world.headers("auditor", **{"Content-Type": "application/json"})
    for raw in BAD_BODIES:
        response = world.client.post("/v1/retrieve", content=raw, headers=headers)
        assert response.status_code == 403, (raw, response.text)


def test_bad_bodies_answer_a_located_422_and_write_nothing(world: World) -> None:
    before = log_size(world.ctx)
    cases = {
        b'{"content": ""}': "body.content",
        b'{"content": "ok"': "body",
        b"": "body",
        b'{"content": "ok", "nope": 1}': "body.nope",
    }
    for raw, where in cases.items():
        headers = world.headers("user", **{"Content-Type": "application/json"})
        response = world.client.post("/v1/events", content=raw, headers=headers)
        assert response.status_code == 422, (raw, response.text)
        problem = response.json()
        assert problem["title"] == "InvalidInput"
        assert problem["detail"].startswith(where), problem
    plain = world.headers("user", **{"Content-Type": "text/plain"})
    response = world.client.post("/v1/events", content=b'{"content": "ok"}', headers=plain)
    assert response.status_code == 422
    assert log_size(world.ctx) == before


def test_json_media_types_with_parameters_are_accepted(world: World) -> None:
    for media_type in ("application/json; charset=utf-8", "application/vnd.oblivio+json"):
        headers = world.headers("user", **{"Content-Type": media_type})
        body = json.dumps({"content": f"sent as {media_type}"})
        response = world.client.post("/v1/events", content=body, headers=headers)
        assert response.status_code == 201, response.text
        assert response.headers["content-type"] == "application/json"
        stored = response.json()
        assert set(stored) == {"event_id", "node_ids"}


def test_a_user_key_stays_bound_to_its_user(world: World) -> None:
    world.seed("bob", "bob keeps bees")
    headers = world.headers("user")
    foreign = world.client.post(
        "/v1/retrieve", json={"query": "bees", "user_id": "bob"}, headers=headers
    )
    assert foreign.status_code == 404
    own = world.client.post(
        "/v1/retrieve", json={"query": "bees", "user_id": ALICE}, headers=headers
    )
    assert own.status_code == 200
    assert all("bees" not in r["node"]["content"] for r in own.json()["results"])


def route_threads(route: str) -> int:
    return sum(t.name.startswith(f"oblivio-http-{route}_") for t in threading.enumerate())


def test_each_hot_route_has_its_own_bounded_pool(sqlite_world: World) -> None:
    """Stores stuck on the writer lock fill only their own pool: a retrieve still answers.

    The pool is bounded (more threads only contend for the GIL), so this is
    what keeps a burst of slow requests on one route from stalling another.
    """
    world = sqlite_world
    world.seed(ALICE, "alice drinks green tea")
    stuck = 2 * DIRECT_THREADS
    with serve_in_thread(world.ctx, world.settings) as base_url, ExitStack() as stack:
        client = stack.enter_context(httpx.Client(base_url=base_url, timeout=HTTP_TIMEOUT))
        retrieve = {"query": "green tea", "limit": 3}
        headers = world.headers("user")
        assert client.post("/v1/retrieve", json=retrieve, headers=headers).status_code == 200
        stores = stack.enter_context(ThreadPoolExecutor(stuck))
        with world.ctx.store.backend.write_connection():  # every writer now waits
            answers = [
                stores.submit(
                    client.post, "/v1/events", json={"content": "more tea"}, headers=headers
                )
                for _ in range(stuck)
            ]
            wait_for(lambda: route_threads("store_event") == DIRECT_THREADS)
            found = client.post("/v1/retrieve", json=retrieve, headers=headers, timeout=5.0)
            assert found.status_code == 200
            assert found.json()["results"]
            assert not any(a.done() for a in answers)  # still waiting for the lock
        assert [a.result().status_code for a in answers] == [201] * stuck
        assert route_threads("store_event") == DIRECT_THREADS  # the rest queued


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)
