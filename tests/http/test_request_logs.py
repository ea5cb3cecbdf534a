"""Structured access logs: one JSON line per request, tagged with a request id.

A caller's ``X-Request-ID`` is echoed in the response and written to the log
line; without one the server makes one up and still echoes it.  This holds
for refused and failed requests too (they are the ones worth correlating),
and for the server ``oblivio serve`` actually runs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from oblivio.http import app as app_module
from oblivio.http.app import RequestLog
from oblivio.memory import queries
from tests.http.conftest import ALICE, World

ACCESS_LOGGER = "oblivio.access"


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """Every access log record, parsed (a record that is not JSON fails the test)."""
    lines = []
    for record in caplog.records:
        if record.name == ACCESS_LOGGER:
            parsed = json.loads(record.getMessage())
            assert isinstance(parsed, dict)
            lines.append(parsed)
    return lines


def line_for(caplog: pytest.LogCaptureFixture, request_id: str) -> dict[str, Any]:
    found = [line for line in access_lines(caplog) if line.get("request_id") == request_id]
    assert len(found) == 1, f"{len(found)} access log lines for {request_id}"
    return found[0]


def test_a_given_request_id_is_echoed_and_logged(
    sqlite_world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    w = sqlite_world
    seed = w.shared_seed(ALICE)
    # The line names the route template, never the raw path: paths carry user
    # and event ids that must not outlive an erasure in the logs.
    event_route = "/v1/events/{event_id}"
    requests = [
        ("GET", "/v1/health", "/v1/health", None, "none", 200),
        ("POST", "/v1/events", "/v1/events", {"content": "I like tea"}, "user", 201),
        ("GET", f"/v1/events/{seed.event_id}", event_route, None, "user", 200),
        ("GET", f"/v1/events/{uuid.uuid4()}", event_route, None, "user", 404),
        ("GET", "/v1/events/not-a-uuid", event_route, None, "user", 422),
        ("GET", "/v1/events", "/v1/events", None, "none", 401),
        ("GET", "/v1/compliance/audit/export", "/v1/compliance/audit/export", None, "user", 403),
    ]
    for method, path, route, body, principal, status in requests:
        request_id = f"req-{uuid.uuid4().hex}"
        response = w.client.request(
            method, path, json=body, headers=w.headers(principal, **{"X-Request-ID": request_id})
        )
        assert response.status_code == status, response.text
        assert response.headers["x-request-id"] == request_id
        line = line_for(caplog, request_id)
        assert (line["method"], line["route"], line["status"]) == (method, route, status)
        assert path == route or path.rsplit("/", 1)[-1] not in json.dumps(line)
        assert isinstance(line["ms"], int | float)
        assert line["ms"] >= 0


def test_a_request_id_is_made_up_when_none_is_given(
    sqlite_world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    first = sqlite_world.client.get("/v1/health")
    second = sqlite_world.client.get("/v1/health")
    made_up = [first.headers["x-request-id"], second.headers["x-request-id"]]
    assert all(re.fullmatch(r"[0-9a-f]{32}", r) for r in made_up), made_up
    assert made_up[0] != made_up[1]
    for request_id in made_up:
        assert line_for(caplog, request_id)["route"] == "/v1/health"


def test_awkward_request_ids_keep_the_line_valid_json(
    sqlite_world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    awkward = 'a"b\\c}{' + "x" * 100
    response = sqlite_world.client.get("/v1/health", headers={"X-Request-ID": awkward})
    assert response.headers["x-request-id"] == awkward
    assert line_for(caplog, awkward)["status"] == 200


def test_the_log_line_holds_no_secret(
    sqlite_world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    token = sqlite_world.tokens["user"]
    sqlite_world.client.post(
        "/v1/events", json={"content": "my secret diary"}, headers=sqlite_world.headers("user")
    )
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert token.split("_", 2)[2] not in logged  # the secret (it may hold "_")
    assert "my secret diary" not in logged


def test_a_failing_request_still_carries_its_request_id(
    sqlite_world: World, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr(queries, "get_event", broken)
    request_id = f"req-{uuid.uuid4().hex}"
    response = sqlite_world.client.get(
        f"/v1/events/{uuid.uuid4()}",
        headers=sqlite_world.headers("user", **{"X-Request-ID": request_id}),
    )
    assert response.status_code == 500
    assert "the database went away" not in response.text  # details stay in the logs
    assert response.headers.get("x-request-id") == request_id, "the 500 lost its request id"
    assert line_for(caplog, request_id)["status"] == 500


def test_a_failure_after_the_response_started_is_raised_not_answered_twice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once the status line is out, a 500 problem can no longer be sent: the
    error propagates (the server drops the connection) and the line is still written."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)

    async def half_answered(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("the body could not be produced")

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": "GET", "headers": [(b"x-request-id", b"req-half")]}
    with pytest.raises(RuntimeError, match="could not be produced"):
        asyncio.run(RequestLog(half_answered)(scope, receive, send))
    assert [m["type"] for m in sent] == ["http.response.start"]
    assert (b"x-request-id", b"req-half") in sent[0]["headers"]
    assert line_for(caplog, "req-half")["status"] == 200


def test_no_line_is_built_while_the_access_log_is_off(
    sqlite_world: World, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator who turns the access log off saves the line's work on every request."""
    caplog.set_level(logging.WARNING, logger=ACCESS_LOGGER)
    built: list[str] = []
    line = app_module._access_line

    def counted(*args: Any) -> str:
        built.append(line(*args))
        return built[-1]

    monkeypatch.setattr(app_module, "_access_line", counted)
    assert sqlite_world.client.get("/v1/health").status_code == 200
    assert built == []
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    assert sqlite_world.client.get("/v1/health").status_code == 200
    assert len(built) == 1
    assert access_lines(caplog) == [json.loads(built[0])]
