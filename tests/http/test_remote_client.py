"""``RemoteClient`` against a real server: the facade's results, errors and examples over HTTP.

The server is the real app under uvicorn with its worker loops (``live_server``,
both backends), or ``oblivio serve`` itself for the documentation's examples.
Results are compared with what the in-process facade returns on the same store.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from eventstore.errors import InvalidInputError, NotFoundError, OperationalError
from oblivio import AsyncRemoteClient, RemoteClient
from oblivio.errors import (
    ForbiddenError,
    IdempotencyConflictError,
    ItemScopeConflictError,
    NodeUnavailableError,
    UnauthorizedError,
)
from oblivio.memory import compliance, items, queries
from oblivio.remote import RetryPolicy
from oblivio.settings import Settings
from tests.http._serve import oblivio_serve
from tests.http.conftest import ALICE, BOB, LiveServer, free_port
from tests.test_docs import python_blocks

ROOT = Path(__file__).resolve().parents[2]
#: Retries without pauses: the tests count requests, not seconds.
QUICK = RetryPolicy(attempts=3, backoff=0.0)


@pytest.fixture
def remote(live_server: LiveServer) -> Iterator[RemoteClient]:
    with RemoteClient(live_server.base_url, live_server.world.tokens["operator"]) as client:
        yield client


# -- the documentation's examples, unchanged but for the client --------------------------


def _on_remote(code: str, url: str, key: str) -> str:
    """An example with ``MemoryClient("./memory")`` swapped for a remote client."""
    opened = 'MemoryClient("./memory")'
    assert code.count(opened) == 1, "the example no longer opens ./memory"
    code = code.replace(opened, f"RemoteClient({url!r}, {key!r})")
    return code.replace("from oblivio import MemoryClient", "from oblivio import RemoteClient")


def _at(code: str, url: str, key: str) -> str:
    """docs/remote.md's first example with this server's URL and key."""
    lines = code.splitlines()
    [url_line] = [n for n, line in enumerate(lines) if line.startswith("URL = ")]
    [key_line] = [n for n, line in enumerate(lines) if line.startswith("API_KEY = ")]
    lines[url_line], lines[key_line] = f"URL = {url!r}", f"API_KEY = {key!r}"
    return "\n".join(lines) + "\n"


def _run_examples(path: Path, url: str, key: str) -> int:
    """Run every Python block of ``path`` in one namespace, as tests/test_docs.py does."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    blocks = python_blocks(path)
    for number, block in enumerate(blocks, start=1):
        code = _on_remote(block.code, url, key) if number == 1 else block.code
        assert "MemoryClient(" not in code, f"{path.name}:{number} opens another client"
        exec(compile(code, f"{path.name}:{number}", "exec"), namespace)
    return len(blocks)


def test_readme_and_integration_examples_run_on_oblivio_serve(
    any_database_url: str, tmp_path: Path
) -> None:
    settings = Settings(data_dir=tmp_path / "data", database_url=any_database_url)
    with oblivio_serve(settings) as served:
        url, key = served.base_url, served.operator_key
        readme = _on_remote(python_blocks(ROOT / "README.md")[0].code, url, key)
        exec(compile(readme, "README.md:1", "exec"), {"__name__": "__main__"})
        # The LangGraph store (by index and by template), its agent and async use, the
        # LangMem tools, then the LangChain retriever and tools.
        assert _run_examples(ROOT / "docs" / "integrations.md", url, key) == 8
        # docs/remote.md's own examples, pointed at this server.
        remote_page = python_blocks(ROOT / "docs" / "remote.md")
        namespace: dict[str, Any] = {"__name__": "__main__"}
        for number, block in enumerate(remote_page, start=1):
            code = _at(block.code, url, key) if number == 1 else block.code
            exec(compile(code, f"remote.md:{number}", "exec"), namespace)
        assert len(remote_page) == 2


# -- the facade's results ------------------------------------------------------------------


def test_results_equal_the_facades(live_server: LiveServer, remote: RemoteClient) -> None:
    ctx = live_server.world.ctx
    boston = remote.store("I live in Boston.", user_id=ALICE, meta={"confidence": 0.9})
    chicago = remote.store("I moved to Chicago.", user_id=ALICE, session_id="s1")
    assert remote.get_event(boston, user_id=ALICE) == queries.get_event(ctx, boston, user_id=ALICE)
    assert remote.get_events(user_id=ALICE, session_id="s1") == queries.get_events(
        ctx, user_id=ALICE, session_id="s1"
    )
    [old] = remote.get_event_nodes(boston, user_id=ALICE)
    [new] = remote.get_event_nodes(chicago)
    assert [old] == queries.get_event_nodes(ctx, boston, user_id=ALICE)

    correction = remote.supersede(old.id, new.id, evidence_id=chicago, user_id=ALICE)
    assert correction.replayed is False
    assert remote.supersede(old.id, new.id, evidence_id=chicago, user_id=ALICE).replayed
    assert remote.get_node(old.id) is None  # superseded, as the facade answers
    assert remote.get_node(old.id, include_superseded=True) == queries.get_node(
        ctx, old.id, include_superseded=True
    )
    assert remote.get_assertion_state(old.id) == queries.get_assertion_state(ctx, old.id)
    assert remote.list_nodes(user_id=ALICE) == queries.list_nodes(ctx, user_id=ALICE)

    best = remote.retrieve("Which city do I live in?", user_id=ALICE)
    assert [r.node.id for r in best.results] == [new.id]
    assert best.results[0].components.similarity > 0

    trigger = remote.add_resonance_trigger(user_id=ALICE, keyword="Chicago")
    remote.remove_resonance_trigger(trigger, user_id=ALICE)
    remote.add_negative_attractor("Boston", user_id=ALICE)
    assert remote.negative_attractor_count(user_id=ALICE) == 1
    remote.clear_negative_attractors(user_id=ALICE)
    assert remote.negative_attractor_count(user_id=ALICE) == 0

    assert remote.subject_ref(ALICE) == queries.subject_ref(ctx, ALICE)
    assert ALICE in remote.subjects()
    exported = remote.export_subject(user_id=ALICE)
    manifest = compliance.verify_subject_export(exported, remote.jwks())
    # Two memories, the likely update ("I moved to …" after "I live in …"), the
    # correction, a trigger added and removed, attractors added and cleared.
    assert manifest["counts"]["events"] == 8


def test_corrections_and_ingest_equal_the_facades(
    live_server: LiveServer, remote: RemoteClient
) -> None:
    ctx = live_server.world.ctx
    first, second, third = (live_server.world.seed(ALICE) for _ in range(3))
    contested = remote.contradict(first.node_id, second.node_id, user_id=ALICE)
    assert contested.replayed is False
    assert remote.get_assertion_state(first.node_id) == queries.get_assertion_state(
        ctx, first.node_id
    )
    resolved = remote.resolve_contradiction(second.node_id, first.node_id, actor_id="agent-7")
    assert resolved.replayed is False
    assert queries.get_node(ctx, first.node_id) is None  # the loser, retired on the server
    [batch] = remote.supersede_many([(second.node_id, third.node_id)], user_id=ALICE)
    assert queries.get_node(ctx, second.node_id) is None  # retired on the server
    assert batch.evidence_id is None

    key = uuid.uuid4()
    reinforced = remote.reinforce(third.node_id, request_id=key, user_id=ALICE)
    assert remote.reinforce(third.node_id, request_id=key, user_id=ALICE) == reinforced
    assert reinforced.reinforcement_count == 1

    said = remote.ingest(b"I moved to Lisbon.", user_id=ALICE, first_person_owner=True)
    [later] = remote.ingest_batch(
        [{"message": "I work at a ceramics studio.", "request_id": uuid.uuid4()}],
        user_id=ALICE,
        wait_for_extraction=True,
    )
    assert later.claim_node_ids is not None
    events = remote.get_events(user_id=ALICE, limit=1000)
    assert events == queries.get_events(ctx, user_id=ALICE, limit=1000)
    assert [e.id for e in events][-2:] == [said.event_id, later.event_id]


def test_store_many_equals_the_facades(live_server: LiveServer, remote: RemoteClient) -> None:
    ctx = live_server.world.ctx
    batch = [
        {"content": "Bob plays the oboe"},
        {"content": "Bob moved", "request_id": uuid.uuid4()},
    ]
    stored = remote.store_many(batch, user_id=BOB)
    events = queries.get_events(ctx, user_id=BOB)
    assert [s.event_id for s in stored] == [e.id for e in events][-2:]
    for item in stored:
        nodes = queries.get_event_nodes(ctx, item.event_id, user_id=BOB)
        assert item.node_ids == tuple(n.id for n in nodes)


def test_items_equal_the_facades(live_server: LiveServer, remote: RemoteClient) -> None:
    ctx = live_server.world.ctx
    first = remote.put_item("notes/city 1?", "Boston", user_id=BOB)
    second = remote.put_item("notes/city 1?", "Chicago", user_id=BOB)
    assert second.replaced == (first.event_id,)
    item = remote.get_item("notes/city 1?", user_id=BOB)
    assert item == items.get_item(ctx, "notes/city 1?", user_id=BOB)
    assert item is not None
    assert item.current.content == "Chicago"
    assert remote.list_items(user_id=BOB) == [item]
    assert remote.list_items(user_id=BOB, keys=["notes/city 1?", "other"]) == [item]
    with pytest.raises(InvalidInputError):
        remote.list_items(user_id=BOB, keys=[])
    assert remote.get_item("no such key", user_id=BOB) is None

    later = datetime.now(UTC) + timedelta(days=1)
    assert remote.set_item_expiry("notes/city 1?", later, user_id=BOB) is True
    assert remote.set_item_expiries({"gone": None}, user_id=BOB) == set()
    refreshed = remote.get_item("notes/city 1?", user_id=BOB)
    assert refreshed is not None
    assert refreshed.expires_at == later
    with pytest.raises(ItemScopeConflictError):
        remote.put_item("notes/city 1?", "Denver", user_id=BOB, scope="project")


def test_a_handle_for_one_user(remote: RemoteClient) -> None:
    bob = remote.for_user(BOB)
    event = bob.store("Bob rides a bike.")
    [node] = bob.get_event_nodes(event)
    assert bob.get_node(node.id) == node
    assert bob.retrieve("bike").results[0].node.id == node.id
    with pytest.raises(AttributeError):
        bob.subjects  # an operator's listing, not one user's  # noqa: B018
    assert bob.forget().status == "completed"


def test_erasure_and_certificates(remote: RemoteClient) -> None:
    event = remote.store("Bob's phone number is 555-0100.", user_id=BOB)
    deleted = remote.delete_event(event, user_id=BOB, wait=True)
    assert deleted.status == "completed"
    assert deleted.certificate is not None
    assert remote.verify_certificate(deleted.certificate)["erasure"]["events_erased"] == 1
    assert remote.erasure_status(deleted.request_id) == deleted
    assert remote.get_certificate(deleted.certificate_id) == deleted.certificate
    assert remote.get_event(event) is None

    remote.store("Bob likes tea.", user_id=BOB)
    forgotten = remote.forget(BOB)
    assert forgotten.kind == "forget"
    assert forgotten.status == "completed"
    assert remote.forget(BOB).request_id == forgotten.request_id  # asking again
    audit = remote.export_audit(until=datetime.now(UTC) + timedelta(hours=1))
    assert compliance.verify_audit_export(audit, remote.jwks())["count"] >= 2


# -- the facade's errors -------------------------------------------------------------------


def test_errors_are_the_facades(live_server: LiveServer, remote: RemoteClient) -> None:
    stored = live_server.world.seed(ALICE)
    request = uuid.uuid4()
    remote.store("Alice drinks tea.", user_id=ALICE, request_id=request)
    with pytest.raises(IdempotencyConflictError):
        remote.store("Alice drinks coffee.", user_id=ALICE, request_id=request)
    with pytest.raises(NodeUnavailableError):
        remote.supersede(uuid.uuid4(), stored.node_id, user_id=ALICE)
    with pytest.raises(InvalidInputError):
        remote.store("x", user_id=ALICE, meta={"confidence": 3})
    with pytest.raises(NotFoundError):
        remote.erasure_status(uuid.uuid4())
    # Unavailable things, answered as the facade answers them.
    assert remote.get_node(uuid.uuid4()) is None
    assert remote.get_event_nodes(uuid.uuid4()) == []
    assert remote.get_node(stored.node_id, user_id=BOB) is None  # another user's node
    # Arguments the server decides are refused before anything is sent.
    with pytest.raises(InvalidInputError, match="user_request"):
        remote.forget(ALICE, reason="correction")
    with pytest.raises(TypeError):
        remote.store("no user")  # type: ignore[call-arg]

    tokens = live_server.world.tokens
    with (
        RemoteClient(live_server.base_url, tokens["bad"]) as stranger,
        pytest.raises(UnauthorizedError),
    ):
        stranger.get_node(stored.node_id)
    with (
        RemoteClient(live_server.base_url, tokens["auditor"]) as auditor,
        pytest.raises(ForbiddenError),
    ):
        auditor.store("an auditor writes", user_id=ALICE)
    with RemoteClient(live_server.base_url, tokens["other_user"]) as bob:
        assert bob.get_node(stored.node_id) is None  # Alice's, seen from Bob's key
        with pytest.raises(NotFoundError):
            bob.store("Bob writes for Alice", user_id=ALICE)


def test_async_client_offers_the_same_methods(live_server: LiveServer) -> None:
    url, key = live_server.base_url, live_server.world.tokens["user"]

    async def session() -> list[str]:
        async with AsyncRemoteClient(url, key) as memory:
            alice = memory.for_user(ALICE)
            event = await alice.store("Alice plays the cello.")
            assert (await alice.get_event(event)).content == "Alice plays the cello."
            [node] = await memory.get_event_nodes(event, user_id=ALICE)
            found = await memory.retrieve("instrument", user_id=ALICE)
            with pytest.raises(NodeUnavailableError):
                await memory.reinforce(uuid.uuid4(), user_id=ALICE)
            status = await memory.forget(ALICE)
            assert status.certificate is not None
            await memory.verify_certificate(status.certificate)
            return [r.node.content for r in found.results if r.node.id == node.id]

    assert asyncio.run(session()) == ["Alice plays the cello."]


# -- retries -------------------------------------------------------------------------------


class Gateway:
    """A real HTTP gateway in front of the server that fails the requests it is told to:
    ``"503"`` answers 503 without forwarding; ``"drop"`` forwards the request and then
    closes the connection without an answer (the request was applied, the answer lost)."""

    def __init__(self, upstream: str, failures: list[str]) -> None:
        self.upstream = upstream
        self.failures = failures
        self.requests: list[str] = []

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def _relay(self) -> None:
                gateway.requests.append(f"{self.command} {self.path}")
                failure = gateway.failures.pop(0) if gateway.failures else None
                if failure == "503":
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                answer = httpx.request(
                    self.command,
                    gateway.upstream + self.path,
                    headers={k: v for k, v in self.headers.items() if k.lower() != "host"},
                    content=self.rfile.read(length),
                    timeout=30,
                )
                if failure == "drop":
                    self.close_connection = True
                    return
                self.send_response(answer.status_code)
                for name in ("content-type", "content-length"):
                    if name in answer.headers:
                        self.send_header(name, answer.headers[name])
                self.end_headers()
                self.wfile.write(answer.content)

            def do_GET(self) -> None:
                self._relay()

            def do_POST(self) -> None:
                self._relay()

            def do_PUT(self) -> None:
                self._relay()

            def do_DELETE(self) -> None:
                self._relay()

            def do_PATCH(self) -> None:
                self._relay()

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()


def test_idempotent_calls_are_retried(live_server: LiveServer) -> None:
    ctx, key = live_server.world.ctx, live_server.world.tokens["operator"]
    gateway = Gateway(live_server.base_url, ["503", "drop"])
    with gateway.running() as url, RemoteClient(url, key, retry=QUICK) as remote:
        # A store with a request id: applied once although its answer was lost.
        event = remote.store("Alice likes jazz.", user_id=ALICE, request_id=uuid.uuid4())
        assert len(gateway.requests) == 3
        assert [e.id for e in queries.get_events(ctx, user_id=ALICE)] == [event]
        gateway.failures[:] = ["503", "503"]
        assert remote.get_event(event) is not None
        assert len(gateway.requests) == 6
        gateway.failures[:] = ["503"] * 3
        with pytest.raises(OperationalError):
            remote.subjects()  # three attempts, then the error
        assert len(gateway.requests) == 9


def test_other_writes_are_sent_once(live_server: LiveServer) -> None:
    ctx, key = live_server.world.ctx, live_server.world.tokens["operator"]
    gateway = Gateway(live_server.base_url, ["drop", "503"])
    with gateway.running() as url, RemoteClient(url, key, retry=QUICK) as remote:
        with pytest.raises(OperationalError, match="may have been applied"):
            remote.store("Alice likes blues.", user_id=ALICE)  # no request id
        assert len(gateway.requests) == 1
        assert len(queries.get_events(ctx, user_id=ALICE)) == 1  # applied once, not again
        with pytest.raises(OperationalError):
            remote.add_negative_attractor("blues", user_id=ALICE)
        assert len(gateway.requests) == 2
        assert queries.negative_attractor_count(ctx, user_id=ALICE) == 0


def test_a_server_that_is_not_there() -> None:
    nobody_listens = f"http://127.0.0.1:{free_port()}"
    with (
        RemoteClient(nobody_listens, "obl_0_x", retry=QUICK) as remote,
        pytest.raises(OperationalError, match="did not answer"),
    ):
        remote.add_negative_attractor("anything", user_id=ALICE)


def test_time_and_filters_equal_the_facades(live_server: LiveServer, remote: RemoteClient) -> None:
    ctx = live_server.world.ctx
    told = {}
    for city, when in (("Chicago", "2024-03-15T00:00:00Z"), ("Boston", "2022-01-01T00:00:00Z")):
        event_id = remote.store(
            f"I live in {city}.", user_id=BOB, occurred_at=when, meta={"topic": "home", "n": 1}
        )
        [told[city]] = remote.get_event_nodes(event_id, user_id=BOB)
    remote.supersede(told["Boston"].id, told["Chicago"].id, user_id=BOB)
    then = datetime(2023, 6, 1, tzinfo=UTC)

    found = remote.retrieve("Where do I live?", user_id=BOB, as_of=then, meta={"n": 1.0})
    assert [r.node.id for r in found.results] == [told["Boston"].id]
    assert found.as_of == then
    asked = remote.retrieve("Where did I live in 2023?", user_id=BOB, resolve_dates=True)
    assert asked.results[0].node.id == told["Boston"].id
    chosen = remote.retrieve("Where do I live?", user_id=BOB, event_ids=[told["Boston"].event_id])
    assert chosen.results == []  # retired now: event_ids narrows, it admits nothing more
    for topic in ("home", {"$prefix": "ho"}):
        listing = {"user_id": BOB, "as_of": then, "meta": {"topic": topic}}
        expected = queries.list_nodes(ctx, **listing)  # type: ignore[arg-type]
        assert remote.list_nodes(**listing) == expected  # type: ignore[arg-type]
        assert [n.id for n in expected.nodes] == [told["Boston"].id]
    assert remote.get_assertion_state(told["Boston"].id, as_of=then) == (
        queries.get_assertion_state(ctx, told["Boston"].id, as_of=then)
    )
    with pytest.raises(InvalidInputError):
        remote.retrieve("Where?", user_id=BOB, as_of=datetime(2023, 6, 1))
