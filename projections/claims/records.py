"""Saved claim records: turning the claims event's data into nodes and claim rows.

Used by the node graph when it applies a claims event (live and on replay)
and by the extraction worker when it builds one, so both derive exactly the
same nodes from the same record.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from eventstore import RecordedEvent, SubjectCipher
from projections import events as ev
from projections.claims.matching import predicate_class
from projections.model import (
    ClaimState,
    Node,
    NodeType,
    Scope,
    SourceType,
    new_node,
)

#: Modalities of claims that count as known observations.
KNOWN_MODALITIES = frozenset({"asserted", "observed"})
#: The structure of a claim as its node's metadata shows it (``claim_`` + field).
CLAIM_FIELDS = (
    "subject_id",
    "subject_kind",
    "speaker",
    "predicate",
    "attribute",
    "object",
    "polarity",
    "modality",
    "temporal_intent",
    "replaces_object",
    "conditions",
    "evidence_start",
    "evidence_end",
    "rule",
    "valid_from",
)


def effective_at(message: RecordedEvent) -> str:
    """When a stored message's statements took effect (the source-effective time,
    :func:`projections.events.effective_at`), as ISO text."""
    return ev.effective_at(message.data or {}, message.recorded_at).isoformat()


def claim_node(event: Mapping[str, Any], claim: Mapping[str, Any]) -> Node:
    """The node of one saved claim of a claims event."""
    at = datetime.fromisoformat(event["extracted_at"])
    meta = {
        **(event.get("meta") or {}),
        **{f"claim_{k}": claim.get(k) for k in CLAIM_FIELDS},
        "claim_source_event_id": event["source_event_id"],
        "claim_extractor": event["plan"]["extractor"],
        "claim_extractor_version": event["plan"]["extractor_version"],
        "claim_plan_version": event["plan"]["plan_version"],
    }
    return new_node(
        id=uuid.UUID(claim["node_id"]),
        event_id=uuid.UUID(event["source_event_id"]),
        content=claim["content"],
        node_type=NodeType(claim["memory_type"]),
        scope=Scope(event["scope"]),
        source_type=SourceType(event["source_type"]),
        created_at=at,
        occurred_at=datetime.fromisoformat(claim["valid_from"]),
        session_id=event.get("session_id"),
        meta=meta,
    )


def entity_node(event: Mapping[str, Any], entity: Mapping[str, Any]) -> Node:
    """The ENTITY node of an identity a claims event names (see ``publication``).

    Its content is the name the identity goes by (the owner's user id, or the
    speaker's name); it has the scope and source type of the message that
    created it, and its own metadata only (``entity_kind``, ``entity_name``).
    """
    at = datetime.fromisoformat(event["extracted_at"])
    return new_node(
        id=uuid.UUID(entity["node_id"]),
        event_id=uuid.UUID(event["source_event_id"]),
        content=entity["name"],
        node_type=NodeType.ENTITY,
        scope=Scope(event["scope"]),
        source_type=SourceType(event["source_type"]),
        created_at=at,
        occurred_at=datetime.fromisoformat(event.get("effective_at") or event["extracted_at"]),
        meta={"entity_kind": entity["kind"], "entity_name": entity["name"]},
    )


def retirable(claim: Mapping[str, Any]) -> bool:
    """Whether a later correction may retire this claim at all."""
    return (
        claim["polarity"] == "positive"
        and claim["modality"] in KNOWN_MODALITIES
        and not claim["conditions"]
    )


def match_key(
    cipher: SubjectCipher,
    event: Mapping[str, Any],
    claim: Mapping[str, Any],
    predicate_cls: str | None = None,
    eligible: bool | None = None,
) -> bytes:
    """The keyed hash a claim is found by (see ``memory_claims``).

    With ``predicate_cls`` and ``eligible`` given, the key a correction looks
    for in that class instead of the claim's own.
    """
    cls = predicate_cls or predicate_class(claim["predicate"], claim.get("attribute"))
    ok = retirable(claim) if eligible is None else eligible
    parts = (
        claim["subject_id"],
        cls,
        event["scope"],
        event["source_type"],
        claim["memory_type"],
        "retirable" if ok else "kept",
    )
    return cipher.mac("claim.match", "\x1f".join(parts).encode())


def claim_row(
    cipher: SubjectCipher,
    plan_event_id: uuid.UUID,
    event: Mapping[str, Any],
    claim: Mapping[str, Any],
) -> dict[str, Any]:
    return {
        "stream_id": cipher.stream_id,
        "node_id": uuid.UUID(claim["node_id"]),
        "event_id": uuid.UUID(event["source_event_id"]),
        "plan_event_id": plan_event_id,
        "match_key": match_key(cipher, event, claim),
        "valid_from": datetime.fromisoformat(claim["valid_from"]),
        "valid_to": None,
        "correction": claim["correction"],
    }


def claim_state(node: Node, row: Any) -> ClaimState:
    """A claim node's structure (from its metadata) with its row's interval."""
    meta = node.meta
    return ClaimState(
        subject_id=uuid.UUID(meta["claim_subject_id"]),
        subject_kind=meta["claim_subject_kind"],
        predicate=meta["claim_predicate"],
        attribute=meta["claim_attribute"],
        object=meta["claim_object"],
        polarity=meta["claim_polarity"],
        modality=meta["claim_modality"],
        temporal_intent=meta["claim_temporal_intent"],
        replaces_object=meta["claim_replaces_object"],
        conditions=tuple(meta["claim_conditions"]),
        evidence_start=meta["claim_evidence_start"],
        evidence_end=meta["claim_evidence_end"],
        source_event_id=row.event_id,
        plan_event_id=row.plan_event_id,
        valid_from=row.valid_from,
        valid_to=row.valid_to,
        correction=row.correction,
    )
