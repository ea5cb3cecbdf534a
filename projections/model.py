"""What the memory projections hold: nodes, edges, their lifecycle, and scores."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class NodeType(enum.StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    EVENT = "event"
    INSTRUCTION = "instruction"
    NOTE = "note"
    ENTITY = "entity"


class Scope(enum.StrEnum):
    PERSONAL = "personal"
    SESSION = "session"
    PROJECT = "project"
    ORGANISATION = "organisation"


class SourceType(enum.StrEnum):
    USER_STATED = "user_stated"
    AGENT_INFERRED = "agent_inferred"
    OBSERVED = "observed"
    IMPORTED = "imported"
    SYSTEM = "system"


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class LifecycleState(enum.StrEnum):
    ACTIVE = "active"
    CONTESTED = "contested"  # part of an unresolved contradiction
    SUPERSEDED = "superseded"  # retired by an explicit correction


class EdgeKind(enum.StrEnum):
    SUPERSEDES = "SUPERSEDES"
    CONTRADICTS = "CONTRADICTS"
    #: A newer memory likely updates an older one (the detector's decision, until
    #: confirmed or rejected: a rejected one is resolved).
    LIKELY_UPDATES = "LIKELY_UPDATES"


# Starting values of a new node, and the reinforcement rule of the seeds:
# each confirmation adds a fixed step up to a cap, never lowering a value
# that already stands above the cap.
INITIAL_CONFIDENCE = 0.7
INITIAL_SALIENCE = 0.5
REINFORCEMENT_STEP = 0.15
REINFORCEMENT_CAP = 0.5
CONFIDENCE_STEP = 0.05
CONFIDENCE_CAP = 0.95


@dataclass(frozen=True)
class Node:
    """A unit of memory derived from one source event."""

    id: uuid.UUID
    event_id: uuid.UUID
    content: str
    node_type: NodeType
    scope: Scope
    source_type: SourceType
    lifecycle: LifecycleState
    confidence_base: float
    salience_base: float
    reinforcement_boost: float
    reinforcement_count: int
    created_at: datetime
    updated_at: datetime
    #: When the statement took effect (its effective time; ``created_at`` is when
    #: the node was derived, the log's time): validity, recency and ``as_of`` use it.
    occurred_at: datetime
    last_reinforced_at: datetime | None = None
    superseded_by: uuid.UUID | None = None
    session_id: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    #: When a memory.archived event took the node out of default retrieval
    #: (the retrieval tier was over capacity); ``None`` while it is in it.
    archived_at: datetime | None = None
    #: The effective time its validity ended: set when a correction retired it (its
    #: successor's effective time, never before its own); ``None`` while it holds.
    valid_to: datetime | None = None


def node_labels(node: Node) -> dict[str, Any]:
    """What a node is and says (its ids, content, type, scope and source) as plain values,
    in the order the HTTP encoding and the graph's item digests both list them."""
    return {
        "id": node.id,
        "event_id": node.event_id,
        "content": node.content,
        "node_type": node.node_type.value,
        "scope": node.scope.value,
        "source_type": node.source_type.value,
    }


def new_node(
    *,
    id: uuid.UUID,
    event_id: uuid.UUID,
    content: str,
    node_type: NodeType,
    scope: Scope,
    source_type: SourceType,
    created_at: datetime,
    occurred_at: datetime | None = None,
    session_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> Node:
    """A node as it is first derived: active, with the starting scores, unreinforced;
    effective from ``occurred_at`` (default: ``created_at``)."""
    return Node(
        id=id,
        event_id=event_id,
        content=content,
        node_type=node_type,
        scope=scope,
        source_type=source_type,
        lifecycle=LifecycleState.ACTIVE,
        confidence_base=INITIAL_CONFIDENCE,
        salience_base=INITIAL_SALIENCE,
        reinforcement_boost=0.0,
        reinforcement_count=0,
        created_at=created_at,
        updated_at=created_at,
        occurred_at=created_at if occurred_at is None else occurred_at,
        session_id=session_id,
        meta=meta or {},
    )


@dataclass(frozen=True)
class Edge:
    kind: EdgeKind
    source: uuid.UUID
    target: uuid.UUID
    event_id: uuid.UUID
    created_at: datetime
    resolved_at: datetime | None = None


@dataclass(frozen=True)
class ClaimState:
    """The structure and validity of a claim node (one extracted by ``ingest``).

    ``valid_to`` is set once a correction retired the claim, automatic or
    explicit (the successor's source-effective time); ``correction`` says what this claim did to
    earlier ones: ``retired``, or why it retired nothing (``ambiguous``,
    ``conditional``, ``unsupported``, ``no_match``; ``none`` when it is no
    correction at all).
    """

    subject_id: uuid.UUID
    subject_kind: str  # owner | speaker | event_local
    predicate: str
    attribute: str | None
    object: str
    polarity: str
    modality: str
    temporal_intent: str
    replaces_object: str | None
    conditions: tuple[str, ...]
    evidence_start: int
    evidence_end: int
    source_event_id: uuid.UUID
    plan_event_id: uuid.UUID
    valid_from: datetime
    valid_to: datetime | None
    correction: str
    #: The event that closed the interval: an explicit supersede (or contradiction
    #: resolution), or the claims event of the message whose claim retired it.
    retired_by_event_id: uuid.UUID | None = None


@dataclass(frozen=True)
class LikelyUpdate:
    """The detector's decision that ``new_node_id`` likely updates ``old_node_id``.

    ``status`` is ``open`` (default retrieval ranks the newer memory where the older
    would rank, the older right below), ``confirmed`` (the older was superseded by
    the newer) or ``rejected`` (both stand as before).
    """

    old_node_id: uuid.UUID
    new_node_id: uuid.UUID
    status: str
    decision_event_id: uuid.UUID
    detector: str
    version: int
    rule: str
    cues: list[str]
    confidence: float


@dataclass(frozen=True)
class AssertionState:
    """Where a node stands: current, contested, or retired, and by what."""

    node_id: uuid.UUID
    lifecycle: LifecycleState
    superseded_by: uuid.UUID | None
    supersedes: list[uuid.UUID]
    contradicted_by: list[uuid.UUID]
    confidence_base: float
    reinforcement_boost: float
    #: Set for claim nodes: their structure, interval and correction outcome.
    claim: ClaimState | None = None
    #: When the node left default retrieval (archived; it is neither retired nor erased).
    archived_at: datetime | None = None
    #: The detector's decision that a newer memory likely updates this one.
    likely_updated_by: LikelyUpdate | None = None
    #: The detector's decisions that this memory likely updates older ones.
    likely_updates: list[LikelyUpdate] = field(default_factory=list)

    @property
    def current(self) -> bool:
        return self.lifecycle is LifecycleState.ACTIVE


@dataclass(frozen=True)
class ScoreComponents:
    """Every input of a retrieval score, so callers can see why a node ranked."""

    similarity: float  # dense channel: cosine of query and node embeddings, at least 0
    lexical: float  # lexical channel: BM25 against what the query could attain, in [0, 1]
    #: λ_q: the lexical channel's share of the match for this query (the same for every
    #: node of one retrieval): ScoringConfig.lexical_weight, lowered by the dense margin.
    lexical_weight: float
    context: float  # added by the node's best session neighbour (see projections.scoring)
    recency: float
    salience: float
    reinforcement: float
    confidence: float
    source_confidence: float
    trigger_boost: float
    attractor_penalty: float
    #: How often retrieval has returned the node (it slows the recency term's fading).
    accesses: int = 0
    #: What the score gained by following a memory this node replaced (a supersede, or
    #: a note whose claims it replaced), above the formula's own value; 0 mostly.
    succession: float = 0.0


@dataclass(frozen=True)
class ScoredNode:
    node: Node
    score: float
    components: ScoreComponents


@dataclass(frozen=True)
class ResonanceTrigger:
    """Boosts nodes matching a keyword (substring) or a text (embedding cosine)."""

    id: uuid.UUID
    keyword: str | None
    text: str | None
    weight: float
    threshold: float


@dataclass(frozen=True)
class NegativeAttractor:
    """Demotes nodes whose embedding aligns with the attractor's."""

    id: uuid.UUID
    text: str
    description: str | None
    source: str | None
    severity: float
