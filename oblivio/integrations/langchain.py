"""LangChain on oblivio: a retriever over ``retrieve()`` and memory tools for agents.

Install with ``pip install 'oblivio[langchain]'``.  Both act for one person
(``user_id``): the retriever ranks that person's current memories (corrections,
attractors and triggers apply), and the tools store, correct and forget on
their behalf.  See docs/integrations.md.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import asdict
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import ConfigDict, Field

from oblivio.client import MemoryClient
from oblivio.errors import NodeUnavailableError
from oblivio.remote import RemoteClient
from projections.model import ScoredNode


class OblivioRetriever(BaseRetriever):
    """The best ``k`` current memories of ``user_id`` for a query, as Documents.

    ``invoke(query, k=…)`` overrides ``k`` for one call.  Each document's
    metadata carries ``node_id``, ``event_id``, ``score``, the score
    ``components``, ``lifecycle``, ``scope``, ``node_type``, ``source_type``,
    ``created_at`` and ``archived_at`` (set for a node archived out of default
    retrieval, which ranks only with ``include_archived``); its ``id`` is the
    node id.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: MemoryClient | RemoteClient
    user_id: str
    k: int = Field(default=4, ge=1, le=1000)
    scopes: list[str] | None = None
    include_superseded: bool = False
    include_archived: bool = False

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        retrieval = self.client.retrieve(
            query,
            user_id=self.user_id,
            limit=kwargs.get("k", self.k),
            scopes=self.scopes,
            include_superseded=self.include_superseded,
            include_archived=self.include_archived,
        )
        return [memory_document(result) for result in retrieval.results]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        sync_manager = run_manager.get_sync()
        return await asyncio.to_thread(
            self._get_relevant_documents, query, run_manager=sync_manager, **kwargs
        )


def memory_document(result: ScoredNode) -> Document:
    """A retrieved node as a LangChain ``Document`` (content and provenance)."""
    node = result.node
    return Document(
        id=str(node.id),
        page_content=node.content,
        metadata={
            "node_id": str(node.id),
            "event_id": str(node.event_id),
            "score": result.score,
            "components": asdict(result.components),
            "lifecycle": node.lifecycle.value,
            "scope": node.scope.value,
            "node_type": node.node_type.value,
            "source_type": node.source_type.value,
            "created_at": node.created_at.isoformat(),
            "archived_at": None if node.archived_at is None else node.archived_at.isoformat(),
        },
    )


def memory_tools(client: MemoryClient | RemoteClient, user_id: str) -> list[BaseTool]:
    """Tools an agent uses for the person ``user_id``: ``store_memory``,
    ``supersede_memory`` and ``forget_user``; each answers in JSON."""

    def store_memory(content: str) -> str:
        """Remember a fact about the user; returns the event id and node ids."""
        event_id = client.store(content, user_id=user_id)
        nodes = client.get_event_nodes(event_id, user_id=user_id)
        return json.dumps({"event_id": str(event_id), "node_ids": [str(n.id) for n in nodes]})

    def supersede_memory(old_node_id: str, new_content: str) -> str:
        """Correct a memory: store new_content and retire the node old_node_id in its favour."""
        if client.get_node(old_node_id, user_id=user_id) is None:
            raise NodeUnavailableError()  # checked first: a refused correction stores nothing
        event_id = client.store(new_content, user_id=user_id)
        [new, *_] = client.get_event_nodes(event_id, user_id=user_id)
        client.supersede(old_node_id, new.id, evidence_id=event_id, user_id=user_id)
        return json.dumps({"event_id": str(event_id), "node_id": str(new.id)})

    def forget_user() -> str:
        """Erase everything remembered about the user (right to erasure); returns the
        erasure status and the certificate id."""
        status = client.forget(user_id)
        certificate = None if status.certificate_id is None else str(status.certificate_id)
        return json.dumps(
            {
                "request_id": str(status.request_id),
                "status": status.status,
                "certificate_id": certificate,
            }
        )

    return [
        StructuredTool.from_function(store_memory),
        StructuredTool.from_function(supersede_memory),
        StructuredTool.from_function(forget_user),
    ]
