"""The MCP tools offer what the facade offers: every retrieval filter, corrections by
contradiction, assertion state, triggers and attractors; no argument is dropped unread."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from mcp import ClientSession

import oblivio
from oblivio import MemoryClient
from oblivio.bootstrap import open_memory
from oblivio.memory import queries
from oblivio.settings import Settings
from tests.mcp.test_mcp_server import (
    Shared,
    alice_server,
    error_text,
    operator_server,
    payload,
)

__all__ = ["alice_server", "operator_server"]  # the shared servers of test_mcp_server


async def call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    return payload(await session.call_tool(tool, arguments))


def test_every_tool_mirrors_a_facade_method_and_the_server_names_its_version(
    operator_server: Shared,
) -> None:
    async def scenario(session: ClientSession) -> None:
        assert session.server_info is not None
        assert session.server_info.version == oblivio.__version__
        tools = {t.name: t.input_schema for t in (await session.list_tools()).tools}
        for name, schema in tools.items():
            assert hasattr(MemoryClient, name.removeprefix("memory_")), name
            assert schema["additionalProperties"] is False, name
        facade = set(inspect.signature(queries.retrieve).parameters) - {"ctx"}
        assert set(tools["memory_retrieve"]["properties"]) == facade

    operator_server.server.run(scenario)


def test_memory_retrieve_takes_the_facades_filters(operator_server: Shared) -> None:
    async def scenario(session: ClientSession) -> None:
        user = {"user_id": "gina"}
        liked = await call(
            session, "memory_store", content="Gina likes jazz", node_type="preference", **user
        )
        await call(
            session,
            "memory_store",
            content="Gina works at a jazz club",
            node_type="fact",
            source_type="agent_inferred",
            scope="project",
            **user,
        )

        async def found(**filters: Any) -> list[str]:
            hits = await call(session, "memory_retrieve", query="jazz", **user, **filters)
            return sorted(h["content"] for h in hits)

        club, likes = ["Gina works at a jazz club"], ["Gina likes jazz"]
        assert await found(exclude_node_types=["fact"]) == likes
        assert await found(node_types=["fact"]) == club
        assert await found(source_types=["agent_inferred"]) == club
        assert await found(scopes=["project"]) == club
        assert await found(scopes=["personal"], consistent=False) == likes
        [hit] = await call(session, "memory_retrieve", query="club", limit=1, **user)
        assert (hit["node_type"], hit["scope"], hit["source_type"], hit["lifecycle"]) == (
            "fact",
            "project",
            "agent_inferred",
            "active",
        )

        loves = await call(session, "memory_store", content="Gina loves jazz", **user)
        await call(
            session,
            "memory_supersede",
            old_node_id=liked["node_ids"][0],
            new_node_id=loves["node_ids"][0],
        )
        assert "Gina likes jazz" not in await found()
        every = await call(
            session, "memory_retrieve", query="jazz", include_superseded=True, **user
        )
        assert {h["content"]: h["lifecycle"] for h in every}["Gina likes jazz"] == "superseded"
        refused = await session.call_tool(
            "memory_retrieve", {"query": "jazz", "scopes": ["galaxy"], **user}
        )
        assert "scopes" in error_text(refused)
        refused = await session.call_tool(
            "memory_retrieve", {"query": "jazz", "meta": {"venue": {"$suffix": "x"}}, **user}
        )
        assert "$prefix" in error_text(refused)

    operator_server.server.run(scenario)


def test_contradictions_and_assertion_state(alice_server: Shared) -> None:
    async def scenario(session: ClientSession) -> None:
        [tea] = (await call(session, "memory_store", content="I drink tea daily"))["node_ids"]
        [none] = (await call(session, "memory_store", content="I never drink tea"))["node_ids"]
        contradiction = await call(session, "memory_contradict", node_id=tea, other_node_id=none)
        assert contradiction["replayed"] is False
        again = await call(session, "memory_contradict", node_id=none, other_node_id=tea)
        assert (again["replayed"], again["event_id"]) == (True, contradiction["event_id"])
        state = await call(session, "memory_get_assertion_state", node_id=tea)
        assert (state["lifecycle"], state["contradicted_by"]) == ("contested", [none])

        await call(session, "memory_resolve_contradiction", winner_node_id=tea, loser_node_id=none)
        lost = await call(session, "memory_get_assertion_state", node_id=none)
        assert (lost["lifecycle"], lost["superseded_by"]) == ("superseded", tea)
        won = await call(session, "memory_get_assertion_state", node_id=tea)
        assert (won["lifecycle"], won["supersedes"], won["contradicted_by"]) == (
            "active",
            [none],
            [],
        )
        repeated = {"winner_node_id": tea, "loser_node_id": none}
        assert (await call(session, "memory_resolve_contradiction", **repeated))["replayed"]
        [milk] = (await call(session, "memory_store", content="I drink milk"))["node_ids"]
        text = error_text(
            await session.call_tool(
                "memory_resolve_contradiction", {"winner_node_id": tea, "loser_node_id": milk}
            )
        )
        assert "LifecycleConflictError: there is no open contradiction" in text

    alice_server.server.run(scenario)


def test_triggers_and_attractors_move_the_ranking(alice_server: Shared) -> None:
    async def scenario(session: ClientSession) -> None:
        for text in ("My cat is called Tom", "My dog is called Rex"):
            await call(session, "memory_store", content=text)

        async def scores() -> dict[str, float]:
            hits = await call(session, "memory_retrieve", query="my pets names", limit=10)
            return {h["content"]: h["score"] for h in hits}

        before = await scores()
        added = await call(session, "memory_add_negative_attractor", text="cat called Tom")
        assert set(added) == {"attractor_id"}
        assert await call(session, "memory_negative_attractor_count") == {"count": 1}
        demoted = await scores()
        assert demoted["My cat is called Tom"] < before["My cat is called Tom"]
        assert await call(session, "memory_clear_negative_attractors") == {"cleared": True}
        assert await call(session, "memory_negative_attractor_count") == {"count": 0}

        trigger = await call(session, "memory_add_resonance_trigger", keyword="Rex", weight=5.0)
        boosted = await scores()
        assert boosted["My dog is called Rex"] > before["My dog is called Rex"]
        removed = await call(
            session, "memory_remove_resonance_trigger", trigger_id=trigger["trigger_id"]
        )
        assert removed == {"removed": trigger["trigger_id"]}
        again = await session.call_tool(
            "memory_remove_resonance_trigger", {"trigger_id": trigger["trigger_id"]}
        )
        assert "NotFoundError" in error_text(again)
        both = await session.call_tool(
            "memory_add_resonance_trigger", {"keyword": "Rex", "text": "dog"}
        )
        assert "exactly one of keyword or text" in error_text(both)
        foreign = await session.call_tool("memory_negative_attractor_count", {"user_id": "bob"})
        assert "acts only for its own user" in error_text(foreign)

    alice_server.server.run(scenario)


def test_unknown_arguments_are_refused_and_write_nothing(operator_server: Shared) -> None:
    async def scenario(session: ClientSession) -> list[str]:
        texts = []
        for tool, arguments in [
            ("memory_ingest", {"message": "I use Vim.", "first_persn_owner": True}),
            ("memory_store", {"content": "I use Emacs.", "scop": "project"}),
            ("memory_forget", {"user_id": "hal", "reasn": "operator_request"}),
        ]:
            result = await session.call_tool(tool, {"user_id": "hal", **arguments})
            texts.append(error_text(result))
        return texts

    ingest, stored, forgot = operator_server.server.run(scenario)
    assert "unknown argument first_persn_owner" in ingest
    assert "first_person_owner" in ingest  # what the tool does take
    assert "unknown argument scop" in stored
    assert "unknown argument reasn" in forgot
    memory = open_memory(Settings(data_dir=Path(operator_server.data_dir)))
    try:
        assert memory.store.read_stream(memory.namespace, "hal") == []
    finally:
        memory.store.close()
