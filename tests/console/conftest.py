"""Fixtures of the console tests: a store with keys of every principal, a
TestClient that signs in like a browser does, and headless Chromium.

The browser is Debian's ``chromium`` driven through Playwright's Python API
with ``executable_path`` (Playwright never downloads a browser here).  Without
the browser or the library the browser tests skip, unless
``OBLIVIO_REQUIRE_BROWSER=1`` (set by ``.ci/run``) turns the skip into a
failure, as ``OBLIVIO_REQUIRE_POSTGRES`` does for PostgreSQL.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi.testclient import TestClient

from tests.http import conftest as http_fixtures
from tests.http.conftest import (
    SERVER_START_TIMEOUT,
    World,
    open_world,
    serve_in_thread,
    settings_for,
    wait_until_healthy,
)

CHROMIUM_ENV = "OBLIVIO_CHROMIUM"
REQUIRE_BROWSER_ENV = "OBLIVIO_REQUIRE_BROWSER"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "console"
SCREENSHOTS_ENV = "OBLIVIO_CONSOLE_SCREENSHOTS"
NONCE = re.compile(r'name="nonce" value="([^"]+)"')
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def sign_in(client: TestClient, token: str) -> Any:
    """Post the sign-in form as a browser would: fetch it, echo its nonce."""
    form = client.get("/console/signin")
    match = NONCE.search(form.text)
    assert match, form.text
    return client.post(
        "/console/signin",
        data={"api_key": token, "nonce": match.group(1)},
        follow_redirects=False,
    )


def csrf_of(client: TestClient, path: str = "/console/requests") -> str:
    match = CSRF.search(client.get(path).text)
    assert match
    return match.group(1)


# The HTTP tests' worlds: a fresh store on each backend in turn, and one on SQLite alone.
world = http_fixtures.world
sqlite_world = http_fixtures.sqlite_world


@pytest.fixture
def embedded_world(sqlite_world: World) -> World:
    """SQLite only: for tests whose subject is the console's HTTP layer, not storage."""
    return sqlite_world


def console_client(world: World, base_url: str = "http://testserver") -> TestClient:
    """Another browser: a client of the same app with a cookie jar of its own."""
    return TestClient(world.client.app, base_url=base_url, raise_server_exceptions=False)


# -- the browser ------------------------------------------------------------------------


def _no_browser(reason: str) -> None:
    if os.environ.get(REQUIRE_BROWSER_ENV) == "1":
        pytest.fail(f"{reason} and {REQUIRE_BROWSER_ENV}=1", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium for a module's browser tests.

    Module-scoped, not session-scoped: Playwright's sync API keeps an event
    loop running in the main thread while it is open, and later tests that call
    ``asyncio.run`` there would fail.
    """
    executable = os.environ.get(CHROMIUM_ENV, DEFAULT_CHROMIUM)
    if not Path(executable).exists():
        _no_browser(
            f"no Chromium at {executable} (apt-get install chromium, or set {CHROMIUM_ENV})"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _no_browser("the playwright package is not installed (the test extra has it)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def live_console(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, World]]:
    """The app (API, console and workers) served on a loopback port."""
    with (
        open_world(settings_for(sqlite_url, tmp_path / "data")) as w,
        serve_in_thread(w.ctx, w.settings) as base_url,
    ):
        yield base_url, w


@pytest.fixture
def console_without_workers(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, World]]:
    """The app served on a loopback port with no worker running beside it: rebuild
    jobs wait until the test runs them (``world.ctx.rebuilder.run_once()``)."""
    with open_world(settings_for(sqlite_url, tmp_path / "data")) as w:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(w.client.app, log_level="warning", lifespan="off"))
        thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True
        )
        thread.start()
        base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        try:
            wait_until_healthy(base_url, SERVER_START_TIMEOUT, thread.is_alive)
            yield base_url, w
        finally:
            server.should_exit = True
            thread.join(10.0)
            sock.close()
