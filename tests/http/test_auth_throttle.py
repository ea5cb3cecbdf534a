"""Failed authentications are limited per client address: 429 with Retry-After."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from oblivio.http import create_app
from oblivio.http.throttle import FailedAuthThrottle
from oblivio.settings import Settings
from tests.http.conftest import World, open_world

LIMIT = 3


@pytest.fixture
def throttled(sqlite_url: str, tmp_path: Path) -> Iterator[World]:
    settings = Settings(
        data_dir=tmp_path / "data", database_url=sqlite_url, auth_failures_per_minute=LIMIT
    )
    with open_world(settings) as world:
        yield world


def test_guessing_keys_from_one_address_is_refused(throttled: World) -> None:
    world = throttled
    good = world.headers("user")
    guesses = [world.client.get("/v1/events", headers=world.headers("bad")) for _ in range(LIMIT)]
    assert [r.status_code for r in guesses] == [401] * LIMIT
    refused = world.client.get("/v1/events", headers=world.headers("bad"))
    assert refused.status_code == 429
    assert refused.headers["content-type"] == "application/problem+json"
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    # While refused, even the right key is not checked: a hit must look like a miss.
    assert world.client.get("/v1/events", headers=good).status_code == 429
    # Public routes and requests without a key are not throttled.
    assert world.client.get("/v1/health").status_code == 200
    assert world.client.get("/v1/events").status_code == 401

    elsewhere = TestClient(world.client.app, client=("192.0.2.7", 4000))
    assert elsewhere.get("/v1/events", headers=good).status_code == 200


def test_the_window_moves_on() -> None:
    now = [1000.0]
    throttle = FailedAuthThrottle(2, window=60, clock=lambda: now[0])
    throttle.failed("a")
    now[0] += 30
    throttle.failed("a")
    assert throttle.retry_after("a") == 30
    assert throttle.retry_after("b") == 0
    now[0] += 30
    assert throttle.retry_after("a") == 0  # the first failure left the window
    throttle.failed("a")
    assert throttle.retry_after("a") == 30
    assert FailedAuthThrottle(0).retry_after("a") == 0


def test_the_default_limit_applies_to_the_app(tmp_path: Path) -> None:
    app = create_app(None, Settings(data_dir=tmp_path))  # type: ignore[arg-type]
    assert app.state.auth_throttle.limit == Settings().auth_failures_per_minute == 10
