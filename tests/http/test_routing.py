"""Every request reaches its route through FastAPI's routing, middleware and dependencies.

The hot routes (store, retrieve, triggers, attractors) answer as every other
route does: a body that is not JSON at all answers 422; otherwise the key is
checked before the body (401 for a bad key whatever the body holds), then the
body (a located 422, nothing written), then the operation.  Middleware an
operator adds applies to them as to the rest, and the request log names
their route template.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from oblivio.http.app import create_app
from tests.http.conftest import ALICE, BOB, HTTP_TIMEOUT, World, log_size, serve_in_thread

#: JSON bodies the schema refuses.
BAD_BODIES = [b'{"content": ""}', b"", b"[1, 2]", b'{"nope": 1}']
JSON_TYPE = {"Content-Type": "application/json"}

# (principal, path, raw body, extra headers, status): requests that must write nothing.
REFUSED: list[tuple[str, str, bytes, dict[str, str], int]] = [
    ("none", "/v1/events", b'{"content": "tea"}', JSON_TYPE, 401),
    ("bad", "/v1/events", b'{"content": "tea"}', JSON_TYPE, 401),
    ("revoked", "/v1/retrieve", b'{"query": "tea"}', JSON_TYPE, 401),
    ("auditor", "/v1/retrieve", b'{"query": "tea"}', JSON_TYPE, 403),
    ("auditor", "/v1/events", b'{"content": ""}', JSON_TYPE, 403),
    ("auditor", "/v1/events", b"not json", JSON_TYPE, 422),  # not JSON: before the key
    ("none", "/v1/retrieve", b'{"query": "tea"', JSON_TYPE, 422),
    ("user", "/v1/events", b'{"content": ""}', JSON_TYPE, 422),
    ("user", "/v1/events", b'{"content": "ok"', JSON_TYPE, 422),
    ("user", "/v1/events", b"", JSON_TYPE, 422),
    ("user", "/v1/events", b"[1, 2]", JSON_TYPE, 422),
    ("user", "/v1/events", b'{"content": "tea"}', {"Content-Type": "text/plain"}, 422),
    (
        "user",
        "/v1/events",
        b'{"content": "tea", "user_id": "' + BOB.encode() + b'"}',
        JSON_TYPE,
        404,
    ),
    ("user", "/v1/retrieve", b'{"query": "tea", "limit": 0}', JSON_TYPE, 422),
    ("user", "/v1/triggers", b'{"keyword": "tea", "weight": 99}', JSON_TYPE, 422),
    ("user", "/v1/attractors", b'{"nope": 1}', JSON_TYPE, 422),
    ("operator", "/v1/events", b'{"content": "tea"}', JSON_TYPE, 422),  # no user_id
]


@pytest.mark.parametrize(("principal", "path", "raw", "extra", "status"), REFUSED)
def test_refusals_answer_a_problem_and_write_nothing(
    world: World, principal: str, path: str, raw: bytes, extra: dict[str, str], status: int
) -> None:
    before = log_size(world.ctx)
    response = world.client.post(path, content=raw, headers=world.headers(principal, **extra))
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    if status == 401:
        assert response.headers["www-authenticate"] == "Bearer"
    assert log_size(world.ctx) == before


@pytest.mark.parametrize("principal", ["none", "bad", "revoked"])
def test_a_bad_key_is_refused_whatever_the_body_holds(world: World, principal: str) -> None:
    before = log_size(world.ctx)
    for raw in BAD_BODIES:
        headers = world.headers(principal, **JSON_TYPE)
        response = world.client.post("/v1/events", content=raw, headers=headers)
        assert response.status_code == 401, (raw, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
    assert log_size(world.ctx) == before


def test_an_auditor_is_refused_whatever_the_body_holds(world: World) -> None:
    headers = world.headers("auditor", **JSON_TYPE)
    for raw in BAD_BODIES:
        response = world.client.post("/v1/retrieve", content=raw, headers=headers)
        assert response.status_code == 403, (raw, response.text)


def test_bad_bodies_answer_a_located_422(world: World) -> None:
    cases = {
        b'{"content": ""}': "body.content",
        b'{"content": "ok"': "body",
        b"": "body",
        b'{"content": "ok", "nope": 1}': "body.nope",
    }
    for raw, where in cases.items():
        headers = world.headers("user", **JSON_TYPE)
        response = world.client.post("/v1/events", content=raw, headers=headers)
        assert response.status_code == 422, (raw, response.text)
        problem = response.json()
        assert problem["title"] == "InvalidInput"
        assert problem["detail"].startswith(where), problem


def test_json_media_types_with_parameters_are_accepted(world: World) -> None:
    for media_type in ("application/json; charset=utf-8", "application/vnd.oblivio+json"):
        headers = world.headers("user", **{"Content-Type": media_type})
        body = json.dumps({"content": f"sent as {media_type}"})
        response = world.client.post("/v1/events", content=body, headers=headers)
        assert response.status_code == 201, response.text
        assert response.headers["content-type"] == "application/json"
        assert set(response.json()) == {"event_id", "node_ids"}


def test_writes_and_reads_of_the_hot_routes(world: World) -> None:
    headers = world.headers("user")
    writes = [
        ("/v1/events", {"content": "Alice drinks green tea every morning"}),
        ("/v1/triggers", {"keyword": "tea", "weight": 2.0}),
        ("/v1/attractors", {"text": "coffee", "severity": 0.5}),
    ]
    for path, body in writes:
        response = world.client.post(path, json=body, headers=headers)
        assert response.status_code == 201, response.text
    [stored] = world.client.get("/v1/events", headers=headers).json()
    found = world.client.post(
        "/v1/retrieve", json={"query": "green tea", "limit": 5}, headers=headers
    )
    assert found.status_code == 200
    assert [r["node"]["event_id"] for r in found.json()["results"]] == [stored["id"]]


def test_a_user_key_stays_bound_to_its_user(world: World) -> None:
    world.seed(BOB, "bob keeps bees")
    headers = world.headers("user")
    foreign = world.client.post(
        "/v1/retrieve", json={"query": "bees", "user_id": BOB}, headers=headers
    )
    assert foreign.status_code == 404
    own = world.client.post(
        "/v1/retrieve", json={"query": "bees", "user_id": ALICE}, headers=headers
    )
    assert own.status_code == 200
    assert all("bees" not in r["node"]["content"] for r in own.json()["results"])


def test_the_log_names_the_route_template_and_echoes_the_request_id(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="oblivio.access")
    request_id = f"req-{uuid.uuid4().hex}"
    headers = world.headers("user", **{"X-Request-ID": request_id})
    response = world.client.post("/v1/events", json={"content": "tea"}, headers=headers)
    assert response.status_code == 201
    assert response.headers["x-request-id"] == request_id
    [line] = [
        json.loads(r.getMessage())
        for r in caplog.records
        if r.name == "oblivio.access" and request_id in r.getMessage()
    ]
    assert (line["method"], line["route"], line["status"]) == ("POST", "/v1/events", 201)


def test_an_unexpected_error_in_a_hot_route_is_a_logged_500(
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


def test_an_app_under_a_root_path_serves_the_hot_routes(world: World) -> None:
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


def test_added_middleware_applies_to_the_hot_routes(world: World) -> None:
    app = create_app(world.ctx)
    app.add_middleware(Stamp)
    with TestClient(app, raise_server_exceptions=False) as client:
        headers = world.headers("user")
        stored = client.post("/v1/events", json={"content": "tea"}, headers=headers)
        found = client.post("/v1/retrieve", json={"query": "tea"}, headers=headers)
    assert stored.status_code == 201, stored.text
    assert stored.headers.get("x-stamp") == found.headers.get("x-stamp") == "1"


def test_stores_waiting_for_the_writer_lock_do_not_hold_up_a_retrieve(
    sqlite_world: World,
) -> None:
    """While another process holds SQLite's write lock, stores wait and retrieves answer."""
    world = sqlite_world
    world.seed(ALICE, "alice drinks green tea")
    stuck = 8
    database = world.settings.database_url.removeprefix("sqlite:///")
    with serve_in_thread(world.ctx, world.settings) as base_url, ExitStack() as stack:
        client = stack.enter_context(httpx.Client(base_url=base_url, timeout=HTTP_TIMEOUT))
        retrieve = {"query": "green tea", "limit": 3}
        headers = world.headers("user")
        stores = stack.enter_context(ThreadPoolExecutor(stuck))
        other_writer = sqlite3.connect(database, isolation_level=None)
        other_writer.execute("BEGIN IMMEDIATE")  # every store now waits for the lock
        try:
            answers = [
                stores.submit(
                    client.post, "/v1/events", json={"content": "more tea"}, headers=headers
                )
                for _ in range(stuck)
            ]
            time.sleep(0.5)
            found = client.post("/v1/retrieve", json=retrieve, headers=headers, timeout=5.0)
            assert found.status_code == 200
            assert found.json()["results"]
            assert not any(a.done() for a in answers)  # still waiting for the lock
        finally:
            other_writer.execute("ROLLBACK")
            other_writer.close()
        assert [a.result().status_code for a in answers] == [201] * stuck


def document_methods() -> dict[str, set[str]]:
    """Each published path and the methods the OpenAPI document gives it."""
    document = create_app(None).openapi()  # type: ignore[arg-type]  # needs no store
    return {path: {m.upper() for m in item} for path, item in document["paths"].items()}


@pytest.mark.parametrize("root_path", ["", "/memory"])
def test_a_405_allows_every_method_of_its_path(root_path: str) -> None:
    """``Allow`` names every method routed at the path, not the first route's alone."""
    app = create_app(None)  # type: ignore[arg-type]  # routing needs no store
    expected = {
        **{
            path.replace("{", "").replace("}", ""): methods
            for path, methods in document_methods().items()
        },
        "/console/keys": {"GET", "POST"},
        "/console/signin": {"GET", "POST"},
        "/console/static/console.css": {"GET", "HEAD"},
    }
    wrong: list[str] = []
    with TestClient(app, root_path=root_path, raise_server_exceptions=False) as client:
        for path, methods in expected.items():
            refused = client.request("OPTIONS", path)
            allowed = set(refused.headers.get("allow", "").split(", "))
            if refused.status_code != 405 or allowed != methods:
                wrong.append(f"{path}: {refused.status_code} allow {allowed}, not {methods}")
    assert not wrong, "\n".join(wrong)
