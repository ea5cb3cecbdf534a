"""Request and response bodies of the HTTP API."""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
)
from pydantic.config import JsonDict
from typing_extensions import TypedDict

from appdata.apikeys import KeyInfo
from eventstore.errors import InvalidInputError
from oblivio.memory.inputs import MAX_BATCH_MEMORIES
from oblivio.memory.records import MemoryEvent, NodePage
from projections.model import AssertionState, Node, NodeType, Role, Scope, ScoredNode, SourceType
from workers.erasure import ErasureStatus
from workers.policy import LegalGroundName, ReasonName

#: Bodies refuse unknown members.  Their numbers and booleans are also strict
#: (``Field(strict=True)``, ``StrictBool``, ``Integer``): pydantic would read ``false`` as
#: 0, ``"0.5"`` as a number and ``0`` as a boolean, none of which the published schema
#: allows.  Strict mode cannot be
#: set for the whole model: FastAPI validates the parsed JSON as Python objects, where
#: strict mode would refuse ids and times given as text.
Strict = ConfigDict(extra="forbid")

#: What ``eventstore.ids.check_subject`` accepts: 1-256 characters, not only
#: whitespace, no control characters.
USER_ID_PATTERN = r"^[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f][^\x00-\x1f\x7f]*$"
#: The default of a member that may be left out but never sent as null: typed
#: as the member's type for checkers, and not validated (pydantic's default).
ABSENT: Any = None
#: Text that is not only whitespace (a search: somewhere a non-space character).
NOT_BLANK = r"\S"
UserId = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=USER_ID_PATTERN)]


_NUMBER = re.compile(r"\s*[-+]?[\d.eE+-]*\d[\d.eE+-]*\s*")


def _not_a_number(value: object) -> object:
    # pydantic reads a number, or a string of digits, as a Unix time: "-1" or
    # "0.5" would be 1969 and 1970.  A time must say what it means.
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or _NUMBER.fullmatch(value):
        raise ValueError("must be an ISO 8601 date and time, such as 2026-01-31T12:00:00Z")
    return value


#: A time given as ISO 8601 / RFC 3339 text (no zone: UTC).
Instant = Annotated[datetime, BeforeValidator(_not_a_number)]
#: The same, with its time zone required.
AwareInstant = Annotated[AwareDatetime, BeforeValidator(_not_a_number)]


def _json_number(value: object) -> object:
    # JSON Schema's integer: 7.0 is one, but true and "7" are not numbers.  pydantic's
    # lax mode reads all three as 7, its strict mode refuses 7.0 too.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a JSON number")
    return value


#: A whole number as JSON Schema's ``integer`` means it (``7`` or ``7.0``).
Integer = Annotated[int, BeforeValidator(_json_number)]


#: ``meta`` as ``oblivio.memory.inputs.meta`` checks it: flat, ``confidence`` in [0, 1].
META_SCHEMA: JsonDict = {
    "properties": {"confidence": {"type": "number", "minimum": 0, "maximum": 1}}
}
#: first_person_owner binds "I" to the owner: only in the user role, and not with a speaker.
FIRST_PERSON_RULE: JsonDict = {
    "anyOf": [
        {"properties": {"first_person_owner": {"const": False}}},
        {"properties": {"role": {"const": "user"}, "speaker": {"type": "null"}}},
    ]
}
#: enable_speaker_references resolves third-person references to a named speaker.
SPEAKER_REFERENCE_RULE: JsonDict = {
    "anyOf": [
        {"properties": {"enable_speaker_references": {"const": False}}},
        {"required": ["speaker"], "properties": {"speaker": {"type": "string"}}},
    ]
}
#: Both rules on one message (two ``anyOf`` cannot share one schema object).
MESSAGE_RULES: JsonDict = {"allOf": [FIRST_PERSON_RULE, SPEAKER_REFERENCE_RULE]}


class MemoryIn(BaseModel):
    """One memory of a batch: ``content`` and the options of a single store."""

    model_config = Strict
    content: str = Field(min_length=1, max_length=100_000, pattern=NOT_BLANK)
    scope: Scope = Scope.PERSONAL
    role: Role = Role.USER
    session_id: str | None = Field(default=None, min_length=1, max_length=256)
    source_type: SourceType = SourceType.USER_STATED
    node_type: NodeType = NodeType.FACT
    meta: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, json_schema_extra=META_SCHEMA
    )
    request_id: uuid.UUID | None = None
    occurred_at: AwareInstant | None = Field(
        default=None,
        description="When the statement took effect (timezone-aware); none: when stored.",
    )


class StoreRequest(MemoryIn):
    user_id: UserId | None = Field(default=None, description="Required for operator keys.")


class StoreBatchRequest(BaseModel):
    """Several memories of one user, stored atomically (all or none)."""

    model_config = Strict
    memories: list[MemoryIn] = Field(min_length=1, max_length=MAX_BATCH_MEMORIES)
    user_id: UserId | None = Field(default=None, description="Required for operator keys.")


class IngestMessage(BaseModel):
    """One message to ingest; its claims are extracted asynchronously (docs/ingest.md)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=MESSAGE_RULES)
    message: str = Field(min_length=1, max_length=100_000, pattern=NOT_BLANK)
    role: Role = Role.USER
    scope: Scope = Scope.PERSONAL
    source_type: SourceType = SourceType.USER_STATED
    session_id: str | None = Field(default=None, min_length=1, max_length=256)
    occurred_at: Instant | None = Field(
        default=None, description="When the statements took effect (timezone-aware)."
    )
    first_person_owner: StrictBool = Field(
        default=False, description="The message's singular I/me/my is the memory owner."
    )
    speaker: str | None = Field(default=None, min_length=1, max_length=200)
    enable_speaker_references: StrictBool = False
    meta: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, json_schema_extra=META_SCHEMA
    )
    request_id: uuid.UUID | None = None


class IngestRequest(IngestMessage):
    """One message (``message`` and its fields) or several in ``messages``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            **MESSAGE_RULES,
            "oneOf": [
                {"required": ["message"], "not": {"required": ["messages"]}},
                {
                    "required": ["messages"],
                    "not": {"anyOf": [{"required": [name]} for name in IngestMessage.model_fields]},
                },
            ],
        },
    )

    # Absent or a value, never null (a default is not validated).
    message: str = Field(
        default=ABSENT,
        min_length=1,
        max_length=100_000,
        pattern=NOT_BLANK,
    )
    messages: list[IngestMessage] = Field(
        default=ABSENT,
        min_length=1,
        max_length=100,
    )
    user_id: UserId | None = Field(default=None, description="Required for operator keys.")
    wait_for_extraction: StrictBool = False

    def entries(self) -> list[dict[str, Any]]:
        """The per-message dictionaries of ``ingest_batch``."""
        shared = {"user_id", "wait_for_extraction", "messages"}
        if self.messages is not None:
            if self.model_fields_set - shared:
                raise InvalidInputError("give either messages or one message's fields, not both")
            return [m.model_dump() for m in self.messages]
        if self.message is None:
            raise InvalidInputError("message (or messages) is required")
        return [self.model_dump(exclude=shared)]


class IngestedOut(BaseModel):
    event_id: uuid.UUID
    note_node_ids: list[uuid.UUID]
    plan_event_id: uuid.UUID
    claim_node_ids: list[uuid.UUID] | None


class IngestResponse(BaseModel):
    results: list[IngestedOut]


class StoreResponse(BaseModel):
    event_id: uuid.UUID
    node_ids: list[uuid.UUID]


class StoreBatchResponse(BaseModel):
    results: list[StoreResponse] = Field(description="One per memory, in request order.")


class EventOut(MemoryEvent):
    # The stored event as the memory operations return it: its fields are the answer's.

    @classmethod
    def of(cls, event: MemoryEvent) -> EventOut:
        return cls(**vars(event))


class NodeOut(BaseModel):
    id: uuid.UUID
    event_id: uuid.UUID
    content: str
    node_type: NodeType
    scope: Scope
    source_type: SourceType
    lifecycle: str
    confidence_base: float
    salience_base: float
    reinforcement_boost: float
    reinforcement_count: int
    created_at: datetime
    updated_at: datetime
    last_reinforced_at: datetime | None
    superseded_by: uuid.UUID | None
    session_id: str | None
    meta: dict[str, Any]
    #: Set once the node left default retrieval (archived: not erased; docs/retrieval.md).
    archived_at: datetime | None = None
    occurred_at: datetime = Field(description="When its statement took effect.")
    valid_to: datetime | None = Field(
        default=None, description="When a correction ended its validity (effective time)."
    )

    @classmethod
    def of(cls, node: Node) -> NodeOut:
        return cls.model_validate(node, from_attributes=True)


class ClaimStateOut(BaseModel):
    """A claim's structure, validity interval and correction outcome (docs/ingest.md)."""

    model_config = ConfigDict(from_attributes=True)
    subject_id: uuid.UUID
    subject_kind: str
    predicate: str
    attribute: str | None
    object: str
    polarity: str
    modality: str
    temporal_intent: str
    replaces_object: str | None
    conditions: list[str]
    evidence_start: int
    evidence_end: int
    source_event_id: uuid.UUID
    plan_event_id: uuid.UUID
    valid_from: datetime
    valid_to: datetime | None
    correction: str
    retired_by_event_id: uuid.UUID | None = None


class LikelyUpdateOut(BaseModel):
    """The detector's decision that ``new_node_id`` likely updates ``old_node_id``:
    ``open``, ``confirmed`` (superseded) or ``rejected`` (both stand)."""

    old_node_id: uuid.UUID
    new_node_id: uuid.UUID
    status: str
    decision_event_id: uuid.UUID
    detector: str
    version: int
    rule: str
    cues: list[str]
    confidence: float


class AssertionStateOut(BaseModel):
    node_id: uuid.UUID
    lifecycle: str
    superseded_by: uuid.UUID | None
    supersedes: list[uuid.UUID]
    contradicted_by: list[uuid.UUID]
    confidence_base: float
    reinforcement_boost: float
    claim: ClaimStateOut | None = None
    archived_at: datetime | None = None
    likely_updated_by: LikelyUpdateOut | None = None
    likely_updates: list[LikelyUpdateOut] = []

    @classmethod
    def of(cls, state: AssertionState) -> AssertionStateOut:
        return cls.model_validate(state, from_attributes=True)


class Supersedence(BaseModel):
    model_config = Strict
    old_node_id: uuid.UUID
    new_node_id: uuid.UUID
    evidence_id: uuid.UUID | None = None


_ONE_PAIR = ("old_node_id", "new_node_id", "evidence_id")


class SupersedeRequest(BaseModel):
    """One correction (``old_node_id``/``new_node_id``) or several in ``corrections``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {"required": ["old_node_id", "new_node_id"], "not": {"required": ["corrections"]}},
                {
                    "required": ["corrections"],
                    "not": {"anyOf": [{"required": [name]} for name in _ONE_PAIR]},
                },
            ]
        },
    )
    # Absent or a value, never null: the schema says so, and an explicit null is
    # refused like any other wrong type (a default is not validated).
    old_node_id: uuid.UUID = ABSENT
    new_node_id: uuid.UUID = ABSENT
    evidence_id: uuid.UUID | None = None
    corrections: list[Supersedence] = Field(
        default=ABSENT,
        min_length=1,
        max_length=100,
    )
    actor_id: str | None = Field(default=None, min_length=1, max_length=256)
    user_id: UserId | None = Field(
        default=None, description="Only nodes of this user (operator keys); a user key's own."
    )

    def pair_given(self) -> bool:
        return bool(set(_ONE_PAIR) & self.model_fields_set)


class CorrectionOut(BaseModel):
    operation_id: uuid.UUID
    event_id: uuid.UUID
    node_ids: list[uuid.UUID]
    evidence_id: uuid.UUID | None
    replayed: bool


class ContradictRequest(BaseModel):
    model_config = Strict
    node_id: uuid.UUID
    other_node_id: uuid.UUID
    evidence_id: uuid.UUID | None = None
    actor_id: str | None = Field(default=None, min_length=1, max_length=256)
    user_id: UserId | None = Field(
        default=None, description="Only nodes of this user (operator keys); a user key's own."
    )


class LikelyUpdateDecisionRequest(BaseModel):
    """Confirm or reject the likely update of the node in the path."""

    model_config = Strict
    actor_id: str | None = Field(default=None, min_length=1, max_length=256)
    user_id: UserId | None = Field(
        default=None, description="Only nodes of this user (operator keys); a user key's own."
    )


class RejectionOut(BaseModel):
    event_id: uuid.UUID
    decision_event_id: uuid.UUID
    node_ids: list[uuid.UUID]


class ResolveRequest(BaseModel):
    model_config = Strict
    winner_node_id: uuid.UUID
    loser_node_id: uuid.UUID
    evidence_id: uuid.UUID | None = None
    actor_id: str | None = Field(default=None, min_length=1, max_length=256)
    user_id: UserId | None = Field(
        default=None, description="Only nodes of this user (operator keys); a user key's own."
    )


class ReinforceRequest(BaseModel):
    model_config = Strict
    evidence_id: uuid.UUID | None = None


#: A ``meta`` condition met by a string value starting with ``$prefix`` (a plain
#: object, as the memory API takes it; "$prefix" is no Python name).
MetaPrefixIn = TypedDict(
    "MetaPrefixIn", {"$prefix": Annotated[str, StringConstraints(max_length=1000)]}
)
MetaPrefixIn.__pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[attr-defined]


class RetrieveRequest(BaseModel):
    model_config = Strict
    query: str = Field(min_length=1, max_length=10_000, pattern=NOT_BLANK)
    user_id: UserId | None = Field(default=None, description="Required for operator keys.")
    limit: Integer = Field(default=10, ge=1, le=1000)
    scopes: list[Scope] | None = None
    node_types: list[NodeType] | None = None
    exclude_node_types: list[NodeType] | None = None
    source_types: list[SourceType] | None = None
    include_superseded: StrictBool = False
    include_archived: StrictBool = Field(
        default=False, description="Also rank nodes archived out of the retrieval tier."
    )
    consistent: StrictBool = True
    as_of: AwareInstant | None = Field(
        default=None,
        description="Rank what was valid at this moment (effective time; docs/retrieval.md).",
    )
    occurred_since: AwareInstant | None = Field(
        default=None,
        description="Only memories that took effect at or after this time (before occurred_until).",
    )
    occurred_until: AwareInstant | None = Field(
        default=None, description="Only memories that took effect before this time."
    )
    meta: dict[str, str | int | float | bool | MetaPrefixIn | None] | None = Field(
        default=None,
        description=(
            "Only memories whose metadata has each key with this value (a JSON scalar), "
            'or a string value starting with a text ({"$prefix": "text"}).'
        ),
    )
    resolve_dates: StrictBool = Field(
        default=False,
        description="Without as_of: a query naming one year, month or day ranks as of its end.",
    )
    event_ids: list[uuid.UUID] | None = Field(
        default=None,
        max_length=100_000,
        description="Rank only the nodes of these stored events (a selection of the caller's).",
    )


#: One metadata condition of a listing's query string: ``key=value``, the value a JSON
#: scalar (``topic="home"``, ``rank=2``, ``done=true``, ``owner=null``) or a prefix
#: condition (``namespace={"$prefix": "[\"memories\""}``).
_JSON_STRING = r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"'
_JSON_SCALAR = (
    _JSON_STRING
    + r"|-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,15})?(?:[eE][+-]?[0-9]{1,2})?"
    + r"|true|false|null"
)
_META_VALUE = rf'{_JSON_SCALAR}|\{{\s*"\$prefix"\s*:\s*{_JSON_STRING}\s*\}}'
MetaCondition = Annotated[
    str,
    StringConstraints(pattern=rf"^[^=\x00-\x1f\x7f]+=(?:{_META_VALUE})$", max_length=1000),
    Field(
        description=(
            'key=JSON value, e.g. topic="home" or rank=2, or key={"$prefix": "text"}; '
            "repeat for several"
        )
    ),
]


def meta_conditions(conditions: list[str]) -> dict[str, Any]:
    """The ``meta`` filter of ``key=value`` conditions (a key given twice: the last)."""
    pairs = (condition.split("=", 1) for condition in conditions)
    return {key: json.loads(value) for key, value in pairs}


class ScoredOut(BaseModel):
    node: NodeOut
    score: float
    components: dict[str, float]

    @classmethod
    def of(cls, scored: ScoredNode) -> ScoredOut:
        components = scored.components
        return cls(
            node=NodeOut.of(scored.node), score=scored.score, components=dict(vars(components))
        )


class RetrieveResponse(BaseModel):
    query: str
    results: list[ScoredOut]
    as_of: datetime | None = Field(
        default=None, description="The moment ranked: as given, or resolved from the query."
    )
    restricted: bool = Field(
        default=False,
        description="Processing of the person is restricted (GDPR Art. 18): nothing is "
        "ranked and the results are empty.",
    )


class TriggerRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {"required": ["keyword"], "not": {"required": ["text"]}},
                {"required": ["text"], "not": {"required": ["keyword"]}},
            ]
        },
    )
    user_id: UserId | None = Field(default=None, description="Required for operator keys.")
    # Absent or a string, never null (a default is not validated).
    keyword: str = Field(default=ABSENT, min_length=1, max_length=1000, pattern=NOT_BLANK)
    text: str = Field(default=ABSENT, min_length=1, max_length=10_000, pattern=NOT_BLANK)
    weight: float = Field(default=1.0, ge=0, le=10, strict=True)
    threshold: float = Field(default=0.8, ge=-1, le=1, strict=True)


class AttractorRequest(BaseModel):
    model_config = Strict
    user_id: UserId | None = Field(default=None, description="Required for operator keys.")
    text: str = Field(min_length=1, max_length=10_000, pattern=NOT_BLANK)
    description: str | None = Field(default=None, min_length=1, max_length=1000)
    source: str | None = Field(default=None, min_length=1, max_length=200)
    severity: float = Field(default=1.0, ge=0, le=1, strict=True)


class IdOut(BaseModel):
    id: uuid.UUID


class CountOut(BaseModel):
    count: int


Reason = ReasonName
LegalGround = LegalGroundName


class ForgetRequest(BaseModel):
    model_config = Strict
    reason: Reason | None = Field(
        default=None,
        description="Optional: a forget over HTTP is always recorded as user_request, and "
        "stating any other reason answers 403.",
    )
    legal_ground: LegalGround = "art17-1-b"
    wait_seconds: float = Field(default=5.0, ge=0, le=60, strict=True, allow_inf_nan=False)


class JobOut(BaseModel):
    projection: str
    status: str
    attempts: int
    last_error: str | None


class ErasureOut(BaseModel):
    request_id: uuid.UUID
    kind: str
    status: str
    subject_ref: str
    received_at: datetime
    deadline_at: datetime
    overdue: bool
    erased_at: datetime | None
    completed_at: datetime | None
    events_erased: int
    certificate_id: uuid.UUID | None
    certificate: dict[str, Any] | None
    jobs: list[JobOut]
    status_url: str

    @classmethod
    def of(cls, status: ErasureStatus) -> ErasureOut:
        return cls(
            **{k: v for k, v in vars(status).items() if k != "jobs"},
            jobs=[JobOut.model_validate(j, from_attributes=True) for j in status.jobs],
            status_url=f"/v1/compliance/requests/{status.request_id}",
        )


class HealthOut(BaseModel):
    status: str
    database: str
    backend: str
    projection_lag: dict[str, int]


class NodePageOut(BaseModel):
    """A page of nodes; pass ``next_after`` as ``after`` for the next (null: the last page)."""

    nodes: list[NodeOut]
    next_after: uuid.UUID | None

    @classmethod
    def of(cls, page: NodePage) -> NodePageOut:
        return cls(nodes=[NodeOut.of(n) for n in page.nodes], next_after=page.next_cursor)


KeyId = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{16}$")]
PrincipalKind = Literal["user", "operator", "auditor"]


class KeyRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [
                {
                    "properties": {"principal": {"const": "user"}, "user_id": {"type": "string"}},
                    "required": ["user_id"],
                },
                {
                    "properties": {
                        "principal": {"enum": ["operator", "auditor"]},
                        "user_id": {"type": "null"},
                    }
                },
            ]
        },
    )
    principal: PrincipalKind
    user_id: UserId | None = Field(default=None, description="Required for user keys only.")
    expires_at: AwareInstant | None = Field(
        default=None, description="When the key stops authenticating; none: never."
    )
    cluster_wide: StrictBool = Field(
        default=False,
        description="An operator key of no namespace, serving every one (only a "
        "cluster-wide key may create one). Otherwise the key belongs to the caller's "
        "namespace.",
    )


class KeyOut(BaseModel):
    key_id: str
    principal: PrincipalKind
    subject_ref: str | None = Field(description="The bound user's pseudonymous reference.")
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None
    namespace: str | None = Field(
        description="The namespace the key serves; null for a cluster-wide operator key."
    )

    @classmethod
    def of(cls, key: KeyInfo) -> KeyOut:
        return cls(
            key_id=key.key_id,
            principal=key.principal,  # type: ignore[arg-type]  # the table holds only these
            subject_ref=key.subject_ref,
            created_at=key.created_at,
            revoked_at=key.revoked_at,
            expires_at=key.expires_at,
            namespace=key.namespace,
        )


class IssuedKeyOut(BaseModel):
    key: KeyOut
    token: str = Field(description="The bearer token: shown in this response only.")


#: What ``oblivio.memory.items.item_key`` accepts.
ItemKey = Annotated[str, StringConstraints(min_length=1, max_length=256)]


class ItemPutRequest(BaseModel):
    """A new revision of a keyed item (``MemoryClient.put_item``)."""

    model_config = Strict
    content: str = Field(min_length=1, max_length=100_000, pattern=NOT_BLANK)
    user_id: UserId | None = Field(default=None, description="Required for operator keys.")
    scope: Scope = Scope.PERSONAL
    source_type: SourceType = SourceType.USER_STATED
    node_type: NodeType = NodeType.FACT
    meta: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, json_schema_extra=META_SCHEMA
    )
    expires_at: AwareInstant | None = Field(
        default=None, description="The revision's retention time; none: kept until erased."
    )
    occurred_at: AwareInstant | None = Field(
        default=None,
        description="When the statement took effect (timezone-aware); none: when stored.",
    )


class ItemRevisionOut(BaseModel):
    event_id: uuid.UUID
    node_ids: list[uuid.UUID]
    replaced: list[uuid.UUID] = Field(description="Earlier readable revisions, oldest first.")


class StoredItemOut(BaseModel):
    key: str
    current: EventOut
    revision_ids: list[uuid.UUID] = Field(
        description="Every readable revision, in the order their values took effect "
        "(the last is the current one)."
    )
    created_at: datetime
    expires_at: datetime | None


class ItemExpiriesRequest(BaseModel):
    """New retention times of items, by key (null: kept until erased)."""

    model_config = Strict
    user_id: UserId | None = Field(default=None, description="Required for operator keys.")
    expiries: dict[ItemKey, AwareInstant | None] = Field(max_length=1000)


class ItemKeysOut(BaseModel):
    keys: list[str] = Field(description="The keys that named an item.")


class SubjectsOut(BaseModel):
    user_ids: list[str]


class EmbedderOut(BaseModel):
    name: str = Field(description="The name the store's vectors are recorded under.")
    spec: str | None = Field(description="The setting it was chosen by; null: given in code.")
    dimension: int


class SubjectRefOut(BaseModel):
    subject_ref: str = Field(description="The pseudonymous reference certificates name.")
