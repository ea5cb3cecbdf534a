"""`oblivio mcp` over real stdio with the official MCP client: tools per principal."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from eventstore import apikeys
from oblivio.bootstrap import open_memory
from oblivio.cli import main
from oblivio.memory import compliance
from oblivio.settings import Settings
from workers.archiving import Archiver

MEMORY_TOOLS = {
    "memory_store",
    "memory_ingest",
    "memory_retrieve",
    "memory_get_node",
    "memory_supersede",
    "memory_reinforce",
    "memory_contradict",
    "memory_resolve_contradiction",
    "memory_get_assertion_state",
    "memory_confirm_likely_update",
    "memory_reject_likely_update",
    "memory_add_resonance_trigger",
    "memory_remove_resonance_trigger",
    "memory_add_negative_attractor",
    "memory_clear_negative_attractors",
    "memory_negative_attractor_count",
}
COMPLIANCE_TOOLS = {"memory_forget", "memory_delete_event"}
TIMEOUT_SECONDS = 60


def make_key(data_dir: Path, kind: str, user_id: str | None = None) -> str:
    memory = open_memory(Settings(data_dir=data_dir))
    try:
        with memory.store.transaction() as tx:
            return apikeys.issue(
                tx.connection, kind, user_id, None, memory.clock(), namespace=memory.namespace
            )[1]
    finally:
        memory.store.close()


def server(data_dir: Path, key: str) -> StdioServerParameters:
    env = {**os.environ, "OBLIVIO_API_KEY": key}
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "oblivio.cli", "--data-dir", str(data_dir), "mcp"],
        env=env,
    )


def payload(result: Any) -> Any:
    """The tool's return value (lists come wrapped as {"result": [...]})."""
    assert not result.is_error, result
    value = result.structured_content
    if value is None:
        return json.loads(result.content[0].text)
    return value["result"] if set(value) == {"result"} else value


async def session_run(params: StdioServerParameters, scenario: Any) -> Any:
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await scenario(session)


class SharedServer:
    """One ``oblivio mcp`` process and session that several tests send scenarios to.

    Starting the server (interpreter, store, embedder) is most of an MCP test's time.
    The session lives in one task of an event loop in a thread of its own, since
    anyio's contexts must be left in the task that entered them; each scenario runs
    in that task, and its result or failure comes back to the test.
    """

    def __init__(self, params: StdioServerParameters) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._work: asyncio.Queue[tuple[Any, asyncio.Future[Any]] | None] = self._call(
            self._queue()
        )
        self._session = asyncio.run_coroutine_threadsafe(self._serve(params), self._loop)

    async def _queue(self) -> asyncio.Queue[tuple[Any, asyncio.Future[Any]] | None]:
        return asyncio.Queue()

    async def _serve(self, params: StdioServerParameters) -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            while (item := await self._work.get()) is not None:
                scenario, done = item
                try:
                    done.set_result(await scenario(session))
                except Exception as e:  # an assertion of the test: raised in the test
                    done.set_exception(e)

    async def _submit(self, scenario: Any) -> Any:
        done: asyncio.Future[Any] = self._loop.create_future()
        await self._work.put((scenario, done))
        return await done

    def _call(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(TIMEOUT_SECONDS)

    def run(self, scenario: Any) -> Any:
        return self._call(self._submit(scenario))

    def close(self) -> None:
        self._call(self._work.put(None))
        self._session.result(TIMEOUT_SECONDS)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(TIMEOUT_SECONDS)


@dataclass
class Shared:
    data_dir: Path
    server: SharedServer


@contextlib.contextmanager
def shared_server(
    data_dir: Path, config_home: Path, kind: str, user_id: str | None = None
) -> Iterator[Shared]:
    # A module's fixture runs outside the per-test keyring directory (tests/conftest.py):
    # point the key and the server at the suite's own, never at the home directory.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("XDG_CONFIG_HOME", str(config_home))
        env.setenv("OBLIVIO_KEYRING_DIR", str(config_home / "oblivio" / "keyrings"))
        server_ = SharedServer(server(data_dir, make_key(data_dir, kind, user_id)))
        try:
            yield Shared(data_dir, server_)
        finally:
            server_.close()


@pytest.fixture(scope="module")
def alice_server(tmp_path_factory: pytest.TempPathFactory, config_home: Path) -> Iterator[Shared]:
    """A server for a user key of alice, shared by this module's tests of user keys."""
    data_dir = tmp_path_factory.mktemp("mcp-user")
    with shared_server(data_dir, config_home, "user", "alice") as shared:
        yield shared


@pytest.fixture(scope="module")
def operator_server(
    tmp_path_factory: pytest.TempPathFactory, config_home: Path
) -> Iterator[Shared]:
    """A server for an operator key, shared by this module's tests of operator keys."""
    data_dir = tmp_path_factory.mktemp("mcp-operator")
    with shared_server(data_dir, config_home, "operator") as shared:
        yield shared


def test_a_user_key_gets_memory_tools_bound_to_its_user(alice_server: Shared) -> None:

    async def scenario(session: ClientSession) -> None:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == MEMORY_TOOLS
        first = payload(await session.call_tool("memory_store", {"content": "I live in Boston"}))
        second = payload(await session.call_tool("memory_store", {"content": "I moved to Chicago"}))
        await session.call_tool(
            "memory_supersede",
            {
                "old_node_id": first["node_ids"][0],
                "new_node_id": second["node_ids"][0],
            },
        )
        hits = payload(await session.call_tool("memory_retrieve", {"query": "Chicago"}))
        assert [h["content"] for h in hits] == ["I moved to Chicago"]
        refused = await session.call_tool(
            "memory_store", {"content": "someone else's", "user_id": "bob"}
        )
        assert refused.is_error

    alice_server.server.run(scenario)
    memory = open_memory(Settings(data_dir=alice_server.data_dir))
    try:
        assert memory.store.read_stream(memory.namespace, "bob") == []
    finally:
        memory.store.close()


def test_memory_ingest_extracts_claims_and_retires_corrected_ones(tmp_path: Path) -> None:
    key = make_key(tmp_path, "user", "sam")

    async def scenario(session: ClientSession) -> None:
        for text in ("I use an insulin pump.", "I don't use an insulin pump anymore."):
            arguments = {"message": text, "first_person_owner": True, "wait_for_extraction": True}
            result = payload(await session.call_tool("memory_ingest", arguments))
            assert len(result["claim_node_ids"]) == 1
        hits = payload(await session.call_tool("memory_retrieve", {"query": "insulin pump"}))
        contents = sorted(h["content"] for h in hits)
        # The two raw notes, the current (negative) claim and the owner's entity node
        # (its content the user id); the retired claim is out.
        assert contents == [
            "I don't use an insulin pump anymore",
            "I don't use an insulin pump anymore.",
            "I use an insulin pump.",
            "sam",
        ]
        for bad in ({"first_person_owner": "yes"}, {"enable_speaker_references": True}):
            refused = await session.call_tool("memory_ingest", {"message": "I use Vim.", **bad})
            assert refused.is_error

    anyio.run(session_run, server(tmp_path, key), scenario)


def test_an_operator_key_adds_the_compliance_tools(operator_server: Shared) -> None:

    async def scenario(session: ClientSession) -> None:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == MEMORY_TOOLS | COMPLIANCE_TOOLS
        await session.call_tool("memory_store", {"content": "likes tea", "user_id": "carol"})
        status = payload(await session.call_tool("memory_forget", {"user_id": "carol"}))
        assert status["status"] == "completed"
        assert status["certificate"] is not None
        assert status["received_at"].endswith("Z")  # as HTTP writes times, not "+00:00"
        left = payload(
            await session.call_tool("memory_retrieve", {"query": "tea", "user_id": "carol"})
        )
        assert left == []

    operator_server.server.run(scenario)


def archive_to(data_dir: Path, user_id: str, capacity: int) -> int:
    """Run the archiving job on the server's store (another process), at ``capacity``."""
    memory = open_memory(Settings(data_dir=data_dir))
    try:
        stream = memory.store.head(memory.namespace, user_id)
        assert stream is not None
        job = Archiver(memory.store, memory.graph, memory.scoring, capacity, memory.clock)
        return job.run([stream.stream.stream_id]).nodes
    finally:
        memory.store.close()


def test_memory_retrieve_ranks_archived_memories_only_on_request(operator_server: Shared) -> None:

    async def scenario(session: ClientSession) -> None:
        for text in ("Erin drinks green tea", "Erin's dog is called Rex"):
            await session.call_tool("memory_store", {"content": text, "user_id": "erin"})
        assert archive_to(operator_server.data_dir, "erin", capacity=1) == 1
        query = {"query": "green tea and the dog Rex", "user_id": "erin"}
        [kept] = payload(await session.call_tool("memory_retrieve", query))
        assert kept["archived_at"] is None
        every = payload(
            await session.call_tool("memory_retrieve", query | {"include_archived": True})
        )
        assert len(every) == 2
        [archived] = [hit for hit in every if hit["archived_at"] is not None]
        assert archived["node_id"] != kept["node_id"]
        refused = await session.call_tool("memory_retrieve", query | {"include_archived": "yes"})
        assert refused.is_error

    operator_server.server.run(scenario)


def test_an_unknown_key_is_refused(tmp_path: Path) -> None:
    make_key(tmp_path, "operator")  # the store exists; this key does not
    # Refused before any stdio is served: the command in this process is enough.
    done = CliRunner().invoke(
        main, ["--data-dir", str(tmp_path), "mcp"], env={"OBLIVIO_API_KEY": "obl_0000_nope"}
    )
    assert done.exit_code == 1
    assert "unknown, revoked or expired" in done.output


def error_text(result: Any) -> str:
    assert result.is_error, result
    return "\n".join(c.text for c in result.content)


def test_refusals_reach_the_agent_with_their_type_and_reason(alice_server: Shared) -> None:

    async def scenario(session: ClientSession) -> None:
        tools = {t.name: t.input_schema for t in (await session.list_tools()).tools}
        store = tools["memory_store"]
        scope = store["$defs"][store["properties"]["scope"]["$ref"].split("/")[-1]]
        assert scope["enum"] == ["personal", "session", "project", "organisation"]
        assert tools["memory_get_node"]["properties"]["node_id"]["format"] == "uuid"
        assert tools["memory_supersede"]["properties"]["actor_id"]["maxLength"] == 256

        unknown = str(uuid.uuid4())
        text = error_text(
            await session.call_tool(
                "memory_supersede", {"old_node_id": unknown, "new_node_id": str(uuid.uuid4())}
            )
        )
        assert "NodeUnavailableError: Node is not available" in text
        text = error_text(await session.call_tool("memory_retrieve", {"query": "   "}))
        assert "InvalidInputError: content must be a non-empty string" in text
        text = error_text(await session.call_tool("memory_get_node", {"node_id": "not-a-uuid"}))
        assert "node_id" in text
        assert "uuid" in text.lower()
        text = error_text(
            await session.call_tool("memory_store", {"content": "x", "scope": "galaxy"})
        )
        assert "scope" in text
        assert "personal" in text
        text = error_text(
            await session.call_tool("memory_store", {"content": "x", "user_id": "eve"})
        )
        assert "InvalidInputError: this key acts only for its own user" in text

    alice_server.server.run(scenario)


def test_an_operator_names_the_actor_of_an_erasure(operator_server: Shared) -> None:

    async def scenario(session: ClientSession) -> dict[str, Any]:
        tools = {t.name: t.input_schema for t in (await session.list_tools()).tools}
        reasons = tools["memory_forget"]["properties"]["reason"]["enum"]
        assert "ttl_expired" in reasons
        await session.call_tool("memory_store", {"content": "likes tea", "user_id": "finn"})
        refused = await session.call_tool("memory_forget", {"user_id": "finn", "reason": "why"})
        assert "reason" in error_text(refused)
        status: dict[str, Any] = payload(
            await session.call_tool(
                "memory_forget",
                {"user_id": "finn", "reason": "operator_request", "actor_id": "ticket-4711"},
            )
        )
        return status

    status = operator_server.server.run(scenario)
    memory = open_memory(Settings(data_dir=operator_server.data_dir))
    try:
        claims = compliance.verify_certificate(memory, status["certificate"])
        expected = memory.store.codec.pseudonym("actor", "ticket-4711")
    finally:
        memory.store.close()
    assert claims["request"]["requested_by"] == expected
    assert claims["request"]["reason"] == "operator_request"


def test_memory_tools_know_when_things_held(alice_server: Shared) -> None:

    async def scenario(session: ClientSession) -> None:
        told = []
        for text, when in (
            ("My violin teacher is Hedda", "2024-09-01T00:00:00Z"),
            ("My violin teacher is Oskar", "2021-09-01T00:00:00Z"),
        ):
            stored = await session.call_tool("memory_store", {"content": text, "occurred_at": when})
            told.append(payload(stored)["node_ids"][0])
        hedda, oskar = told
        await session.call_tool("memory_supersede", {"old_node_id": oskar, "new_node_id": hedda})
        query = {"query": "Who is my violin teacher?", "limit": 1}
        [now] = payload(await session.call_tool("memory_retrieve", query))
        assert now["content"] == "My violin teacher is Hedda"
        [then] = payload(
            await session.call_tool("memory_retrieve", query | {"as_of": "2023-01-01T00:00:00Z"})
        )
        assert then["content"] == "My violin teacher is Oskar"
        assert then["valid_to"] == "2024-09-01T00:00:00Z"
        [asked] = payload(
            await session.call_tool(
                "memory_retrieve",
                query | {"query": "Who was my violin teacher in 2022?", "resolve_dates": True},
            )
        )
        assert asked["content"] == "My violin teacher is Oskar"
        state = payload(
            await session.call_tool(
                "memory_get_assertion_state", {"node_id": oskar, "as_of": "2023-01-01T00:00:00Z"}
            )
        )
        assert state["lifecycle"] == "active"
        naive = await session.call_tool("memory_retrieve", query | {"as_of": "2023-01-01T00:00:00"})
        assert naive.is_error

    alice_server.server.run(scenario)
