"""What the memory operations return, beyond nodes themselves."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from projections.model import Node, NodeType, Role, Scope, ScoredNode, SourceType


@dataclass(frozen=True)
class MemoryEvent:
    """A stored memory event as its owner may read it."""

    id: uuid.UUID
    user_id: str
    content: str
    scope: Scope
    role: Role
    source_type: SourceType
    node_type: NodeType
    session_id: str | None
    meta: dict[str, Any]
    version: int
    # A description in a field's metadata is what the HTTP API's schema says of it.
    recorded_at: datetime = field(metadata={"description": "When the log recorded it."})
    #: When the statement took effect (``occurred_at`` as stored; else ``recorded_at``).
    occurred_at: datetime = field(
        metadata={"description": "When it took effect (default: recorded_at)."}
    )


@dataclass(frozen=True)
class StoredMemory:
    """The outcome of storing a memory: its event and the nodes derived from it."""

    event_id: uuid.UUID
    node_ids: tuple[uuid.UUID, ...]


@dataclass(frozen=True)
class ItemRevision:
    """The outcome of ``put_item``: the new revision, and the revisions it replaced."""

    event_id: uuid.UUID
    node_ids: tuple[uuid.UUID, ...]
    replaced: tuple[uuid.UUID, ...]  # the earlier readable revisions' events, oldest first


@dataclass(frozen=True)
class StoredItem:
    """A keyed item as its owner may read it: its current revision and its history."""

    key: str
    current: MemoryEvent
    revision_ids: tuple[uuid.UUID, ...]  # every readable revision's event, in effective order
    created_at: datetime  # when the oldest readable revision was recorded
    expires_at: datetime | None  # the current revision's retention time


@dataclass(frozen=True)
class Correction:
    """The outcome of supersede / contradict / resolve_contradiction."""

    operation_id: uuid.UUID
    event_id: uuid.UUID
    node_ids: tuple[uuid.UUID, ...]
    evidence_id: uuid.UUID | None
    replayed: bool  # True when this call repeated an earlier, identical one


@dataclass(frozen=True)
class Rejection:
    """The outcome of reject_likely_update: the event that records it, the decision it
    rejects, and the (older, newer) nodes, which both stand again."""

    event_id: uuid.UUID
    decision_event_id: uuid.UUID
    node_ids: tuple[uuid.UUID, uuid.UUID]


@dataclass(frozen=True)
class Retrieval:
    """Scored nodes, best first."""

    query: str
    results: list[ScoredNode] = field(default_factory=list)
    #: The moment ranked: ``as_of`` as given, or resolved from the question's date.
    as_of: datetime | None = None
    #: Processing of the person is restricted (GDPR Art. 18): nothing was ranked.
    restricted: bool = False

    @property
    def nodes(self) -> list[Any]:
        return [r.node for r in self.results]


@dataclass(frozen=True)
class NodePage:
    """A page of nodes, oldest first; ``next_cursor`` (the last node's id) continues after
    it (None: the end)."""

    nodes: list[Node]
    next_cursor: uuid.UUID | None


@dataclass(frozen=True)
class EmbedderInfo:
    """The store's embedder (one per store, chosen by name): what its vectors are called,
    the name it is configured by (``None``: an object supplied in code), its dimension."""

    name: str
    spec: str | None
    dimension: int
