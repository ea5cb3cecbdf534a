"""The LangChain retriever passes LangChain's standard retriever tests; the tools work."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from oblivio import LifecycleState, MemoryClient
from oblivio.integrations.langchain import OblivioRetriever, memory_tools
from workers.archiving import Archiver

FACTS = [
    "Alice lives in Chicago.",
    "Alice drinks green tea every morning.",
    "Alice's sister is called Maya.",
    "Alice plays the cello on Sundays.",
    "Alice works as a nurse in a children's hospital.",
]


class TestOblivioRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's own retriever contract, on each backend (the ``client`` fixture)."""

    memory: MemoryClient

    @pytest.fixture(autouse=True)
    def _memories(self, client: MemoryClient) -> None:
        for fact in FACTS:
            client.store(fact, user_id="alice")
        self.memory = client

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return OblivioRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"client": self.memory, "user_id": "alice"}

    @property
    def retriever_query_example(self) -> str:
        return "What does Alice drink?"


def test_documents_carry_provenance_and_corrections_apply(client: MemoryClient) -> None:
    old = client.store("Alice lives in Boston.", user_id="alice")
    new = client.store("Alice moved to Chicago.", user_id="alice")
    [old_node] = client.get_event_nodes(old, user_id="alice")
    [new_node] = client.get_event_nodes(new, user_id="alice")
    client.supersede(old_node.id, new_node.id, evidence_id=new, user_id="alice")

    [doc] = OblivioRetriever(client=client, user_id="alice", k=5).invoke("Where does Alice live?")
    assert doc.page_content == "Alice moved to Chicago."
    assert doc.id == str(new_node.id)
    assert doc.metadata["node_id"] == str(new_node.id)
    assert doc.metadata["event_id"] == str(new)
    assert doc.metadata["lifecycle"] == "active"
    assert doc.metadata["score"] > 0
    assert set(doc.metadata["components"]) >= {"similarity", "recency", "confidence"}
    history = OblivioRetriever(client=client, user_id="alice", include_superseded=True)
    lifecycles = {d.page_content: d.metadata["lifecycle"] for d in history.invoke("live")}
    assert lifecycles["Alice lives in Boston."] == "superseded"
    assert OblivioRetriever(client=client, user_id="bob").invoke("live") == []


def test_the_retriever_ranks_archived_memories_only_on_request(client: MemoryClient) -> None:
    for text in ("Alice drinks green tea.", "Alice's dog is called Rex."):
        client.store(text, user_id="alice")
    ctx = client.context
    stream = ctx.store.head(ctx.namespace, "alice")
    assert stream is not None
    job = Archiver(ctx.store, ctx.graph, ctx.scoring, 1, ctx.clock)
    assert job.run([stream.stream.stream_id]).nodes == 1

    query = "green tea and the dog Rex"
    [kept] = OblivioRetriever(client=client, user_id="alice", k=5).invoke(query)
    assert kept.metadata["archived_at"] is None
    every = OblivioRetriever(client=client, user_id="alice", k=5, include_archived=True)
    docs = every.invoke(query)
    assert len(docs) == 2
    [archived] = [d for d in docs if d.metadata["archived_at"] is not None]
    assert archived.id != kept.id
    node = client.get_node(archived.id, user_id="alice")
    assert node is not None
    assert node.archived_at is not None
    assert archived.metadata["archived_at"] == node.archived_at.isoformat()


def test_tools_store_supersede_and_forget(client: MemoryClient) -> None:
    tools = {tool.name: tool for tool in memory_tools(client, "alice")}
    assert set(tools) == {"store_memory", "supersede_memory", "forget_user"}

    stored = json.loads(tools["store_memory"].invoke({"content": "Alice lives in Boston."}))
    [old_node_id] = stored["node_ids"]
    corrected = json.loads(
        tools["supersede_memory"].invoke(
            {"old_node_id": old_node_id, "new_content": "Alice moved to Chicago."}
        )
    )
    old = client.get_node(old_node_id, user_id="alice", include_superseded=True)
    assert old is not None
    assert old.lifecycle is LifecycleState.SUPERSEDED
    assert str(old.superseded_by) == corrected["node_id"]
    with pytest.raises(ValueError, match="node"):
        tools["supersede_memory"].invoke({"old_node_id": "nope", "new_content": "x"})
    assert len(client.get_events(user_id="alice")) == 2  # the refused correction wrote nothing

    erased = json.loads(tools["forget_user"].invoke({}))
    assert erased["status"] == "completed"
    certificate = client.get_certificate(erased["certificate_id"])
    claims = client.verify_certificate(certificate, client.jwks())
    assert claims["subject"]["reference"] == client.subject_ref("alice")
    assert client.retrieve("Chicago", user_id="alice").results == []
