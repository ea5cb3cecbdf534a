"""Failed authentications are limited per client address: 429 with Retry-After; the
address is the one that connected, or, from a proxy the operator names, the client it
forwards for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from oblivio.http import create_app
from oblivio.http.throttle import FailedAuthThrottle
from oblivio.settings import Settings
from tests.http.conftest import HTTP_TIMEOUT, World, open_world, serve_in_thread

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


# -- forwarded headers, against a real server ------------------------------------------
#
# The whole 127.0.0.0/8 is loopback: a client bound to 127.0.0.2 really connects from
# another address than one bound to 127.0.0.1 (the proxy, where one is named).

PROXY, ELSEWHERE = "127.0.0.1", "127.0.0.2"


def served_throttle(tmp_path: Path, sqlite_url: str, proxies: tuple[str, ...]) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        database_url=sqlite_url,
        auth_failures_per_minute=LIMIT,
        trusted_proxies=proxies,
    )


def status_from(
    base_url: str, token: str, forwarded_for: str | None = None, source: str = PROXY
) -> int:
    """``GET /v1/events`` with ``token``, connecting from ``source``."""
    headers = {"Authorization": f"Bearer {token}"}
    if forwarded_for is not None:
        headers["X-Forwarded-For"] = forwarded_for
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=HTTP_TIMEOUT) as client:
        return client.get(f"{base_url}/v1/events", headers=headers).status_code


def test_without_a_trusted_proxy_forwarded_addresses_are_ignored(
    sqlite_url: str, tmp_path: Path
) -> None:
    """The default: a client's X-Forwarded-For neither spreads its failures over made-up
    addresses nor locks out the address it names."""
    settings = served_throttle(tmp_path, sqlite_url, ())
    with open_world(settings) as world, serve_in_thread(world.ctx, settings) as base_url:
        bad, good = world.tokens["bad"], world.tokens["user"]
        rotated = [status_from(base_url, bad, f"{ELSEWHERE}, 198.51.100.{i}") for i in range(LIMIT)]
        assert rotated == [401] * LIMIT
        # Every failure counted against the address that connected.
        assert status_from(base_url, bad, "198.51.100.23") == 429
        assert status_from(base_url, good, ELSEWHERE) == 429
        # The address the forged headers named is not held back.
        assert status_from(base_url, good, source=ELSEWHERE) == 200


def test_a_named_proxy_s_forwarded_address_is_counted(sqlite_url: str, tmp_path: Path) -> None:
    """Behind a proxy the operator names, failures count per client it forwards for: the
    address the proxy saw connecting, not one the client wrote into the header it passed
    on; anyone else's forwarded headers are still ignored."""
    settings = served_throttle(tmp_path, sqlite_url, (PROXY,))
    with open_world(settings) as world, serve_in_thread(world.ctx, settings) as base_url:
        bad, good = world.tokens["bad"], world.tokens["user"]
        guesser = "203.0.113.9"
        assert [status_from(base_url, bad, guesser) for _ in range(LIMIT)] == [401] * LIMIT
        assert status_from(base_url, bad, guesser) == 429
        assert status_from(base_url, good, guesser) == 429  # a hit must look like a miss
        # The guesser's own header, passed on with its address appended, changes nothing.
        assert status_from(base_url, good, f"198.51.100.23, {guesser}") == 429
        # Other clients of the proxy, and the proxy itself, are not held back.
        assert status_from(base_url, good, "198.51.100.23") == 200
        assert status_from(base_url, good, f"{guesser}, 198.51.100.23") == 200
        assert status_from(base_url, good) == 200
        # A client that is not the proxy names no one: its failures are its own.
        for _ in range(LIMIT):
            assert status_from(base_url, bad, "198.51.100.23", source=ELSEWHERE) == 401
        assert status_from(base_url, good, "198.51.100.23", source=ELSEWHERE) == 429
        assert status_from(base_url, good, "198.51.100.23") == 200


def test_trusted_proxies_are_addresses_or_networks() -> None:
    settings = Settings.from_env({"OBLIVIO_TRUSTED_PROXIES": "10.0.0.7, 172.18.0.0/16,::1"})
    assert settings.trusted_proxies == ("10.0.0.7/32", "172.18.0.0/16", "::1/128")
    assert Settings().trusted_proxies == ()
    for wrong in ("*", "localhost", "10.0.0.300"):
        with pytest.raises(ValueError, match="not an IP address or network"):
            Settings(trusted_proxies=(wrong,))
