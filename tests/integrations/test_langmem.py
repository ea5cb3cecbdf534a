"""LangMem's memory tools on OblivioStore: create, update, delete, search, then forget.

The tools are invoked directly, as an agent's tool calls would be, without a
language model: LangMem fills its namespace template from the call's config
(``langgraph_user_id``), and the store's template names the same segment.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any

from langchain_core.tools import BaseTool
from langmem import create_manage_memory_tool, create_search_memory_tool

from oblivio import LifecycleState, MemoryClient
from oblivio.integrations.langgraph import OblivioStore

NAMESPACE = ("memories", "{langgraph_user_id}")


def config(user: str) -> dict[str, Any]:
    return {"configurable": {"langgraph_user_id": user}}


def memory_id(answer: str) -> str:
    """The memory id in a manage tool's answer, such as ``created memory <uuid>``."""
    found = re.search(r"memory ([0-9a-f-]{36})$", answer)
    assert found is not None, answer
    return str(uuid.UUID(found[1]))


def found(search: BaseTool, user: str, query: str) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = json.loads(search.invoke({"query": query}, config(user)))
    return hits


def test_langmem_tools_create_update_delete_search_and_forget(client: MemoryClient) -> None:
    store = OblivioStore(client, namespace_template=NAMESPACE)
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)

    tea = memory_id(manage.invoke({"content": "Alice drinks green tea"}, config("alice")))
    city = memory_id(manage.invoke({"content": "Alice lives in Boston"}, config("alice")))
    memory_id(manage.invoke({"content": "Bob drinks black coffee"}, config("bob")))
    assert client.subjects() == ["alice", "bob"]

    [best, *_] = found(search, "alice", "What does Alice drink?")
    assert (best["key"], best["value"]) == (tea, {"content": "Alice drinks green tea"})
    assert best["namespace"] == ["memories", "alice"]
    assert best["score"] is not None
    assert {hit["key"] for hit in found(search, "alice", "coffee")} == {tea, city}  # only hers

    moved = {"content": "Alice moved to Chicago", "action": "update", "id": city}
    assert memory_id(manage.invoke(moved, config("alice"))) == city
    [now] = [hit for hit in found(search, "alice", "Where does Alice live?") if hit["key"] == city]
    assert now["value"] == {"content": "Alice moved to Chicago"}
    events = {e.content: e.id for e in client.get_events(user_id="alice")}
    [boston] = client.get_event_nodes(events["Alice lives in Boston"], user_id="alice")
    assert boston.lifecycle is LifecycleState.SUPERSEDED  # an update is a correction

    deleted = manage.invoke({"action": "delete", "id": tea}, config("alice"))
    assert deleted == f"Deleted memory {tea}"
    assert [hit["key"] for hit in found(search, "alice", "green tea")] == [city]
    assert client.get_event(events["Alice drinks green tea"], user_id="alice") is None

    status = store.forget("alice")
    assert status.status == "completed"
    assert found(search, "alice", "Chicago") == []
    assert found(search, "alice", "tea") == []
    assert client.get_events(user_id="alice") == []
    assert [hit["value"]["content"] for hit in found(search, "bob", "coffee")] == [
        "Bob drinks black coffee"
    ]


def test_langmem_tools_run_async(client: MemoryClient) -> None:
    store = OblivioStore(client, namespace_template=NAMESPACE)
    manage = create_manage_memory_tool(namespace=NAMESPACE, store=store)
    search = create_search_memory_tool(namespace=NAMESPACE, store=store)

    async def scenario() -> list[dict[str, Any]]:
        await manage.ainvoke({"content": "Carol plays the viola"}, config("carol"))
        hits: list[dict[str, Any]] = json.loads(
            await search.ainvoke({"query": "instrument"}, config("carol"))
        )
        return hits

    [hit] = asyncio.run(scenario())
    assert hit["value"] == {"content": "Carol plays the viola"}
    assert store.forget("carol").status == "completed"
    assert store.search(("memories", "carol")) == []
