"""The express lane (``oblivio.http.express``) answers exactly as FastAPI's way does.

The same app is driven twice: as uvicorn calls it (hot routes take the lane)
and through ``FastAPI.__call__`` (every request takes the middleware stack
and the router).  Each request must get the same status, content type and
body, bar the ids a successful write makes up, and both ways must log it.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from oblivio.http.app import create_app
from oblivio.http.express import OblivioAPI
from tests.http.conftest import BOB, World, log_size

HOT = [("POST", "/v1/events"), ("POST", "/v1/retrieve"), ("POST", "/v1/triggers")]
HOT += [("POST", "/v1/attractors")]
JSON_TYPE = {"Content-Type": "application/json"}


class FastApiWay:
    """The app as FastAPI alone would serve it: no express lane."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await FastAPI.__call__(self.app, scope, receive, send)


@pytest.fixture
def fastapi_way(world: World) -> Iterator[TestClient]:
    app = world.client.app
    assert isinstance(app, FastAPI)
    with TestClient(FastApiWay(app), raise_server_exceptions=False) as client:
        yield client


def test_the_hot_routes_and_only_they_take_the_lane(world: World) -> None:
    app = world.client.app
    assert isinstance(app, OblivioAPI)
    for method, path in HOT:
        route = app.express_route(method, path)
        assert route is not None
        assert route.path == path
    for method, path in [
        ("GET", "/v1/events"),
        ("GET", "/v1/events/{event_id}"),
        ("PUT", "/v1/nodes/{node_id}/reinforce"),
        ("POST", "/v1/supersedences"),
        ("GET", "/v1/health"),
        ("POST", "/v1/compliance/users/{user_id}/forget"),
    ]:
        assert app.express_route(method, path) is None, (method, path)


# (principal, path, raw body, extra headers): requests that must write nothing.
REFUSED: list[tuple[str, str, bytes, dict[str, str]]] = [
    ("none", "/v1/events", b'{"content": "tea"}', JSON_TYPE),
    ("bad", "/v1/events", b'{"content": "tea"}', JSON_TYPE),
    ("revoked", "/v1/retrieve", b'{"query": "tea"}', JSON_TYPE),
    ("auditor", "/v1/retrieve", b'{"query": "tea"}', JSON_TYPE),
    ("auditor", "/v1/events", b"not json", JSON_TYPE),
    ("user", "/v1/events", b'{"content": ""}', JSON_TYPE),
    ("user", "/v1/events", b'{"content": "ok"', JSON_TYPE),
    ("user", "/v1/events", b"", JSON_TYPE),
    ("user", "/v1/events", b"[1, 2]", JSON_TYPE),
    ("user", "/v1/events", b'{"content": "tea"}', {"Content-Type": "text/plain"}),
    ("user", "/v1/events", b'{"content": "tea", "user_id": "' + BOB.encode() + b'"}', JSON_TYPE),
    ("user", "/v1/retrieve", b'{"query": "tea", "limit": 0}', JSON_TYPE),
    ("user", "/v1/triggers", b'{"keyword": "tea", "weight": 99}', JSON_TYPE),
    ("user", "/v1/attractors", b'{"nope": 1}', JSON_TYPE),
    ("operator", "/v1/events", b'{"content": "tea"}', JSON_TYPE),  # no user_id: 422
]


@pytest.mark.parametrize(("principal", "path", "raw", "extra"), REFUSED)
def test_refusals_are_the_same_both_ways(
    world: World,
    fastapi_way: TestClient,
    principal: str,
    path: str,
    raw: bytes,
    extra: dict[str, str],
) -> None:
    before = log_size(world.ctx)
    headers = world.headers(principal, **extra)
    express = world.client.post(path, content=raw, headers=headers)
    fastapi = fastapi_way.post(path, content=raw, headers=headers)
    assert express.status_code >= 400, express.text
    assert _answer(express) == _answer(fastapi)
    assert express.headers.get("www-authenticate") == fastapi.headers.get("www-authenticate")
    assert log_size(world.ctx) == before


def test_writes_and_reads_are_the_same_both_ways(world: World, fastapi_way: TestClient) -> None:
    headers = world.headers("user")
    writes = [
        ("/v1/events", {"content": "Alice drinks green tea every morning"}),
        ("/v1/triggers", {"keyword": "tea", "weight": 2.0}),
        ("/v1/attractors", {"text": "coffee", "severity": 0.5}),
    ]
    for path, body in writes:
        express = world.client.post(path, json=body, headers=headers)
        fastapi = fastapi_way.post(path, json=body, headers=headers)
        assert express.status_code == fastapi.status_code == 201, (express.text, fastapi.text)
        assert _shape(express.json()) == _shape(fastapi.json())
    query = {"query": "green tea", "limit": 5}
    express = world.client.post("/v1/retrieve", json=query, headers=headers)
    fastapi = fastapi_way.post("/v1/retrieve", json=query, headers=headers)
    assert express.status_code == fastapi.status_code == 200
    # Scores hold the time since storing, so the two answers differ in them only.
    assert _shape(express.json()) == _shape(fastapi.json())
    assert len(express.json()["results"]) == 2  # both stores, one per way


def test_both_ways_log_the_route_template_and_echo_the_request_id(
    world: World, fastapi_way: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="oblivio.access")
    for client in (world.client, fastapi_way):
        request_id = f"req-{uuid.uuid4().hex}"
        headers = world.headers("user", **{"X-Request-ID": request_id})
        response = client.post("/v1/events", json={"content": "tea"}, headers=headers)
        assert response.status_code == 201
        assert response.headers["x-request-id"] == request_id
        [line] = [
            json.loads(r.getMessage())
            for r in caplog.records
            if r.name == "oblivio.access" and request_id in r.getMessage()
        ]
        assert (line["method"], line["route"], line["status"]) == ("POST", "/v1/events", 201)


def test_an_unexpected_error_is_a_logged_500_in_the_lane(
    world: World, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oblivio.memory import commands

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(commands, "store_memory", broken)
    caplog.set_level(logging.INFO, logger="oblivio.access")
    headers = world.headers("user", **{"X-Request-ID": "req-broken"})
    response = world.client.post("/v1/events", json={"content": "tea"}, headers=headers)
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["x-request-id"] == "req-broken"
    assert "on fire" not in response.text
    assert any(
        "req-broken" in r.getMessage() and '"status": 500' in r.getMessage()
        for r in caplog.records
        if r.name == "oblivio.access"
    )


def test_an_app_under_a_root_path_serves_the_hot_routes_the_fastapi_way(world: World) -> None:
    app = create_app(world.ctx)
    with TestClient(app, root_path="/memory", raise_server_exceptions=False) as client:
        headers = world.headers("user")
        stored = client.post("/v1/events", json={"content": "tea"}, headers=headers)
        refused = client.post("/v1/events", json={"content": ""}, headers=headers)
    assert stored.status_code == 201, stored.text
    assert refused.status_code == 422


class Stamp:
    """A middleware an operator might add: it marks every response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message["headers"], (b"x-stamp", b"1")]}
            await send(message)

        await self.app(scope, receive, stamped)


def test_an_app_with_more_middleware_has_no_lane(world: World) -> None:
    app = create_app(world.ctx)
    app.add_middleware(Stamp)
    with TestClient(app, raise_server_exceptions=False) as client:
        stored = client.post("/v1/events", json={"content": "tea"}, headers=world.headers("user"))
    assert stored.status_code == 201, stored.text
    assert stored.headers.get("x-stamp") == "1", "the hot route skipped a middleware"
    assert app.express_route("POST", "/v1/events") is None


def test_no_middleware_slips_in_after_the_first_request(world: World) -> None:
    app = create_app(world.ctx)
    # No lifespan (which would build the middleware stack): the lane serves first.
    client = TestClient(app, raise_server_exceptions=False)
    stored = client.post("/v1/events", json={"content": "tea"}, headers=world.headers("user"))
    assert stored.status_code == 201, stored.text
    with pytest.raises(RuntimeError):
        app.add_middleware(Stamp)  # the lane would skip it: refused, as Starlette refuses


def _answer(response: Any) -> tuple[int, str, Any]:
    return response.status_code, response.headers["content-type"], response.json()


def _shape(document: Any) -> Any:
    """``document`` with its UUID strings and floats masked, keeping its structure."""
    if isinstance(document, dict):
        return {k: _shape(v) for k, v in document.items()}
    if isinstance(document, list):
        return [_shape(v) for v in document]
    if isinstance(document, str):
        try:
            uuid.UUID(document)
        except ValueError:
            return document
        return "<uuid>"
    if isinstance(document, float):
        return "<float>"
    return document
