"""Fixtures of the HTTP API tests: a memory store with API keys of every kind.

``world`` is a fresh store (SQLite file or PostgreSQL database) with one key
per principal, an in-process ``TestClient`` and helpers that seed data from
the Python side, so tests can check what the HTTP layer wrote (or did not).
``live_server`` runs the same app under a real uvicorn server on a loopback
port, with the worker loops ``oblivio serve`` runs next to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from fastapi.testclient import TestClient

from appdata import apikeys
from eventstore import START, schema
from oblivio.bootstrap import build_worker_service, open_memory
from oblivio.http import create_app
from oblivio.http.server import HttpImplementation, uvicorn_config
from oblivio.memory import commands, compliance, queries
from oblivio.memory.context import MemoryContext
from oblivio.settings import Settings
from tests.conftest import WITH_CITUS

ALICE = "alice"
BOB = "bob"
#: Principals of the authorisation matrix, in the order the tests try them.
PRINCIPALS = ("none", "bad", "revoked", "user", "other_user", "operator", "auditor", "cluster")
#: The user each user principal is bound to.
BOUND_USER = {"user": ALICE, "other_user": BOB}
HTTP_TIMEOUT = httpx.Timeout(30.0, connect=5.0)


class Response(Protocol):
    """What the tests read from a response, whichever httpx the TestClient is built on."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def text(self) -> str: ...
    @property
    def content(self) -> bytes: ...
    @property
    def request(self) -> Any: ...
    def json(self) -> Any: ...


@dataclass(frozen=True)
class Seed:
    """One stored memory: its event and the first node derived from it."""

    user: str
    event_id: uuid.UUID
    node_id: uuid.UUID


@dataclass
class World:
    """A store, its settings, one API key per principal and a TestClient."""

    ctx: MemoryContext
    settings: Settings
    tokens: dict[str, str]
    client: TestClient
    _seeds: dict[str, Seed] = field(default_factory=dict)

    def headers(self, principal: str, **extra: str) -> dict[str, str]:
        """Request headers authenticating as ``principal`` (none: no header)."""
        token = self.tokens.get(principal)
        auth = {} if token is None else {"Authorization": f"Bearer {token}"}
        return {**auth, **extra}

    def seed(self, user: str, content: str | None = None) -> Seed:
        """Store a fresh memory for ``user`` directly, bypassing HTTP."""
        text = content or f"{user} likes green tea ({uuid.uuid4().hex[:8]})"
        event_id = commands.store(self.ctx, text, user_id=user)
        nodes = queries.get_event_nodes(self.ctx, event_id, user_id=user)
        assert nodes, "the extractor derived no node"
        return Seed(user, event_id, nodes[0].id)

    def shared_seed(self, user: str) -> Seed:
        """A memory of ``user`` reused by read-only cases."""
        if user not in self._seeds:
            self._seeds[user] = self.seed(user)
        return self._seeds[user]

    def contradiction(self, user: str) -> tuple[Seed, Seed]:
        """Two fresh memories of ``user`` with an open contradiction between their nodes."""
        first, second = self.seed(user), self.seed(user)
        commands.contradict(self.ctx, first.node_id, second.node_id, user_id=user)
        return first, second

    def likely_update(self, user: str) -> tuple[Seed, Seed]:
        """Two fresh memories of ``user``, the newer of which likely updates the older
        (judged: a consistent read waits for the detector)."""
        tag = uuid.uuid4().hex[:8]
        old = self.seed(user, f"My locker {tag} code is 1234.")
        new = self.seed(user, f"My locker {tag} code changed to 5678.")
        queries.retrieve(self.ctx, "locker", user_id=user)
        return old, new

    def trigger(self, user: str) -> uuid.UUID:
        return commands.add_resonance_trigger(self.ctx, user_id=user, keyword="tea")

    def erasure_request(self, user: str) -> uuid.UUID:
        """An erasure request of ``user`` (one event deleted, not waited for)."""
        seed = self.seed(user)
        return compliance.delete_event(self.ctx, seed.event_id, user_id=user).request_id

    def certificate(self, user: str) -> uuid.UUID:
        """The id of a certificate issued for deleting one event of ``user``."""
        seed = self.seed(user)
        status = compliance.delete_event(
            self.ctx, seed.event_id, user_id=user, wait=True, timeout=30
        )
        assert status.certificate_id is not None, status.status
        return status.certificate_id


def settled(world: World, user: str) -> None:
    """Return once the log shows ``user``'s last event to every reader of the store.
    PostgreSQL shows an event only when no transaction of this database that may
    write before it is still running (eventstore/backends/postgres.py), so a
    transaction the app has open can hold a fresh commit back for a moment; this
    world commits one at a time, so everything before that event shows too."""
    event = world.ctx.store.read_stream(world.ctx.namespace, user)[-1].cursor
    deadline = time.monotonic() + 30
    while world.ctx.store.log_head() < event:
        assert time.monotonic() < deadline, "the seeded event never became visible"
        time.sleep(0.05)


def log_size(ctx: MemoryContext) -> tuple[int | None, int, int, int]:
    """What the store holds: the events ``read_all`` delivers, and the rows of
    events, streams and erasure requests.

    ``read_all`` is the log as readers see it.  On PostgreSQL it only delivers
    commit groups below the horizon, so a transaction open in the database can
    hold back events committed before the request; there only the row counts
    (exact on both backends) are compared.
    """
    delivered: int | None = None
    if ctx.store.backend.embedded:
        delivered, cursor = 0, START
        while True:
            page = ctx.store.read_all(cursor, 1000)
            delivered += len(page.events)
            if len(page.events) < 1000:
                break
            cursor = page.next_cursor
    with ctx.store.backend.read_connection() as conn:
        events, streams, requests = (
            int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())
            for table in (schema.events, schema.streams, schema.erasure_requests)
        )
    return delivered, events, streams, requests


def create_key(
    ctx: MemoryContext,
    kind: str,
    user_id: str | None = None,
    *,
    namespace: str | None = None,
    cluster_wide: bool = False,
) -> str:
    """A key of ``namespace`` (default: the context's), or a cluster-wide one."""
    namespace = None if cluster_wide else namespace or ctx.namespace
    ref = None if user_id is None else ctx.store.subject_ref(namespace or ctx.namespace, user_id)
    with ctx.store.transaction() as tx:
        return apikeys.issue(tx.connection, kind, user_id, ref, ctx.clock(), namespace=namespace)[1]


def revoke_key(ctx: MemoryContext, token: str) -> None:
    key_id = token.split("_")[1]
    with ctx.store.transaction() as tx:
        assert apikeys.revoke(tx.connection, key_id, ctx.clock(), apikeys.ALL_NAMESPACES)


def issue_tokens(ctx: MemoryContext) -> dict[str, str]:
    """One token per principal of the matrix; ``none`` has no token."""
    operator = create_key(ctx, "operator")
    revoked = create_key(ctx, "operator")
    revoke_key(ctx, revoked)
    key_id = operator.split("_")[1]
    return {
        "bad": f"obl_{key_id}_not-the-secret",  # a real key id with a wrong secret
        "revoked": revoked,
        "user": create_key(ctx, "user", ALICE),
        "other_user": create_key(ctx, "user", BOB),
        "operator": operator,
        "auditor": create_key(ctx, "auditor"),
        "cluster": create_key(ctx, "operator", cluster_wide=True),
    }


def settings_for(database_url: str, data_dir: Path) -> Settings:
    # The matrix sends many wrong and revoked keys from one address on purpose;
    # the failed-authentication limit has tests of its own (test_auth_throttle.py).
    return Settings(data_dir=data_dir, database_url=database_url, auth_failures_per_minute=0)


@contextlib.contextmanager
def open_world(settings: Settings) -> Iterator[World]:
    ctx = open_memory(settings)
    try:
        tokens = issue_tokens(ctx)
        with TestClient(create_app(ctx, settings), raise_server_exceptions=False) as client:
            yield World(ctx, settings, tokens, client)
    finally:
        ctx.access.close()
        ctx.store.close()


#: Marks a test that takes ``world`` to run on the Citus tier as well (each such test
#: costs seconds there, so the tier takes those whose storage the cluster changes:
#: erasure, certificates, restriction, exports and namespaces over HTTP).
ALSO_ON_CITUS = pytest.mark.parametrize("any_database_url", WITH_CITUS, indirect=True)


@pytest.fixture
def world(any_database_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh store on each backend in turn, with keys for every principal."""
    with open_world(settings_for(any_database_url, tmp_path / "data")) as w:
        yield w


@pytest.fixture
def sqlite_world(sqlite_url: str, tmp_path: Path) -> Iterator[World]:
    """A fresh embedded store, for tests whose subject is the HTTP layer alone."""
    with open_world(settings_for(sqlite_url, tmp_path / "data")) as w:
        yield w


# -- a real server ------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


#: How long a server started for a test may take to answer its first health check.
#: A bound, not a wait (the poll returns at the first 200): at load average 20 on
#: two cores an in-thread start once took longer than 15 s.
SERVER_START_TIMEOUT = 60.0


def wait_until_healthy(base_url: str, timeout: float, alive: Any = None) -> None:
    """Poll ``/v1/health`` until it answers 200; ``alive()`` False stops early."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if alive is not None and not alive():
            raise AssertionError(f"the server exited before it was healthy ({last!r})")
        try:
            if httpx.get(f"{base_url}/v1/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError as e:
            last = e
        time.sleep(0.05)
    raise AssertionError(f"the server at {base_url} was not healthy in {timeout}s: {last!r}")


@contextlib.contextmanager
def serve_in_thread(
    ctx: MemoryContext, settings: Settings, http: HttpImplementation = "auto"
) -> Iterator[str]:
    """Run the app under uvicorn (``http``: its HTTP/1.1 implementation) on a free
    loopback port, plus the worker loops."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn_config(
            create_app(ctx, settings), settings, http=http, log_level="warning", lifespan="off"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True
        )
        service = build_worker_service(ctx, settings)
        service.run()
        thread.start()
        base_url = f"http://127.0.0.1:{port}"
        try:
            wait_until_healthy(base_url, SERVER_START_TIMEOUT, thread.is_alive)
            yield base_url
        finally:
            server.should_exit = True
            thread.join(10.0)
            service.stop()
            service.join(10.0)
            assert not thread.is_alive(), "uvicorn did not shut down"


@dataclass
class LiveServer:
    base_url: str
    world: World

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=HTTP_TIMEOUT)


@pytest.fixture
def live_server(world: World) -> Iterator[LiveServer]:
    """``world`` served by a real uvicorn server over loopback TCP."""
    with serve_in_thread(world.ctx, world.settings) as base_url:
        yield LiveServer(base_url, world)


def child_env() -> dict[str, str]:
    """The environment for an ``oblivio`` subprocess: no inherited OBLIVIO_* settings."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OBLIVIO_")}
