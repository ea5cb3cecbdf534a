"""Who an OblivioStore item belongs to is said by the caller, never guessed.

LangGraph's documentation keys long-term memories as ``("memories", user_id)``;
a store that took segment 0 as the person filed everyone under one subject
called "memories", which no ``forget(user)`` reached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.store.base import InvalidNamespaceError

from oblivio import MemoryClient
from oblivio.integrations.langchain import OblivioRetriever, memory_tools
from oblivio.integrations.langgraph import OblivioStore

DOCUMENTED = [
    pytest.param({"user_segment": 1}, id="user_segment"),
    pytest.param({"namespace_template": ("memories", "{user_id}")}, id="template"),
]


@pytest.mark.parametrize("mapping", DOCUMENTED)
def test_forget_erases_one_users_memories_in_langgraphs_documented_namespaces(
    client: MemoryClient, mapping: dict[str, Any]
) -> None:
    store = OblivioStore(client, **mapping)
    for user in ("user-42", "user-7"):
        store.put(("memories", user), "food", {"food_preference": f"{user} likes pizza"})
        store.put(("memories", user), "city", {"city": f"{user} lives in Oslo"})
    assert client.subjects() == ["user-42", "user-7"]

    status = store.forget("user-42")
    assert status.certificate is not None
    claims = client.verify_certificate(status.certificate, client.jwks())
    assert claims["erasure"]["events_erased"] == 2
    assert claims["subject"]["reference"] == client.subject_ref("user-42")
    assert store.get(("memories", "user-42"), "food") is None
    assert store.search(("memories", "user-42"), query="pizza") == []
    assert client.get_events(user_id="user-42") == []
    kept = store.search(("memories",), query="likes pizza")
    assert {(i.namespace, i.key) for i in kept} == {
        (("memories", "user-7"), "food"),
        (("memories", "user-7"), "city"),
    }
    assert len(client.get_events(user_id="user-7")) == 2
    assert client.get_events(user_id="memories") == []  # no subject named after the folder


def test_the_store_cannot_be_built_without_saying_who_the_person_is(
    client: MemoryClient,
) -> None:
    with pytest.raises(TypeError, match=r"user_segment=1 .*namespace_template="):
        OblivioStore(client)
    with pytest.raises(TypeError, match="which namespace segment is the person"):
        OblivioStore(client, user_segment=1, namespace_template=("memories", "{user_id}"))
    for template, says in [
        (("memories", "users"), "exactly one placeholder"),
        (("{org_id}", "{user_id}"), "exactly one placeholder"),
        (("memories{", "{user_id}"), "fixed text"),
        ("{user_id}", "tuple of strings"),
    ]:
        with pytest.raises(ValueError, match=says):
            OblivioStore(client, namespace_template=template)
    assert client.subjects() == []


def test_anything_but_an_oblivio_client_is_refused_at_construction(tmp_path: Path) -> None:
    for wrong in [str(tmp_path / "memory"), tmp_path, None]:
        refused = r"needs an open oblivio\.MemoryClient or oblivio\.RemoteClient, not"
        with pytest.raises(TypeError, match=refused):
            OblivioStore(wrong, user_segment=0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="OblivioRetriever needs an open"):
            OblivioRetriever(client=wrong, user_id="alice")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="memory_tools needs an open"):
            memory_tools(wrong, "alice")  # type: ignore[arg-type]
    assert not (tmp_path / "memory").exists()


def test_a_template_pins_its_fixed_segments(client: MemoryClient) -> None:
    store = OblivioStore(client, namespace_template=("memories", "{user_id}"))
    store.put(("memories", "bob", "prefs"), "theme", {"theme": "dark"})
    for wrong, says in [(("bob", "memories"), "does not fit"), (("memories",), "no segment 1")]:
        with pytest.raises(InvalidNamespaceError, match=says):
            store.put(wrong, "k", {"text": "x"})
        assert store.get(wrong, "k") is None
    assert client.subjects() == ["bob"]
    assert store.list_namespaces() == [("memories", "bob", "prefs")]


def test_index_embed_may_only_name_the_stores_embedder(client: MemoryClient) -> None:
    embedder = client.embedder_info()
    assert embedder.spec is not None
    for index in [
        {"embed": embedder.spec},
        {"embed": embedder.name, "dims": embedder.dimension},
        {"dims": embedder.dimension, "fields": ["text"]},
    ]:
        OblivioStore(client, user_segment=0, index=index)  # type: ignore[arg-type]
    for index, says in [
        ({"embed": "openai:text-embedding-3-small", "dims": 1536}, "OBLIVIO_EMBEDDER=NAME"),
        ({"embed": DeterministicFakeEmbedding(size=8)}, "not a DeterministicFakeEmbedding"),
        ({"embed": lambda texts: [[0.0] for _ in texts]}, "not a function"),
        ({"dims": embedder.dimension + 1}, f"has {embedder.dimension} dimensions"),
    ]:
        with pytest.raises(TypeError, match=says):
            OblivioStore(client, user_segment=0, index=index)  # type: ignore[arg-type]


def test_the_retriever_gives_an_items_text_and_keeps_the_rest_in_metadata(
    client: MemoryClient,
) -> None:
    store = OblivioStore(client, namespace_template=("memories", "{user_id}"))
    value = {"content": "Alice drinks green tea", "kind": {"tags": ["habit"], "weight": 2}}
    store.put(("memories", "alice", "habits"), "tea", value)

    [doc] = OblivioRetriever(client=client, user_id="alice", k=1).invoke("What does Alice drink?")
    assert doc.page_content == "Alice drinks green tea\nhabit"
    assert doc.metadata["namespace"] == ["memories", "alice", "habits"]
    assert doc.metadata["key"] == "tea"
    assert doc.metadata["value"] == value
    assert doc.metadata["lifecycle"] == "active"
