"""Publishing one message's plan: resolve subjects, decide retirements, build the event.

Runs in the extraction worker's transaction, under the lock of the owner's
stream, so the earlier claims it reads cannot change before its append.  The
event it returns is the whole derivation (the saved plan, every claim, every
retirement with its before/after snapshots, every correction that retired
nothing and why), so applying it decides nothing and replay gives the same
state.  The retirement rules are the corrections seed's, exactly:

* only an ``update`` retires anything; a negative one retires its denied
  object, a positive one only a named ``replaces_object`` grounded in the
  message;
* conditions, and modalities other than asserted/observed, retire nothing;
* candidates share the resolved subject, scope, source type and memory type,
  are known, positive and unconditional, belong to one of the correction's
  predicate classes (see ``matching``) and are not effective after it;
* the target matches by the bounded lexical rule, and more than one distinct
  matching object retires none;
* a back-dated claim that a correction already stored, effective after it,
  names (by these same rules) is retired by that correction at its effective
  time: the interval it would have had, had the messages come in effective order.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Connection

from eventstore import RecordedEvent, SubjectCipher
from projections import events as ev
from projections.claims.matching import (
    classes_retired_by,
    distinct_objects,
    target_classes,
    target_matches,
)
from projections.claims.plan import ClaimDraft, IngestionPlan
from projections.claims.records import (
    KNOWN_MODALITIES,
    claim_node,
    effective_at,
    match_key,
    retirable,
)
from projections.graph import state_to_json
from projections.model import LifecycleState, Node
from projections.storage.claim_store import ClaimStore
from projections.storage.graph_store import GraphStore, node_from_row, state_of

#: The reserved source metadata key of the first-person declaration.
FIRST_PERSON_OWNER_KEY = "oblivio_first_person_owner_v1"


@dataclass(frozen=True)
class Declaration:
    """Who "I" is in a message, as its ingest call declared."""

    first_person_owner: bool = False
    speaker: str | None = None
    enable_speaker_references: bool = False

    @classmethod
    def of(cls, message: Mapping[str, Any]) -> Declaration:
        ingest = message.get("ingest") or {}
        return cls(
            first_person_owner=(message.get("meta") or {}).get(FIRST_PERSON_OWNER_KEY) is True,
            speaker=ingest.get("speaker"),
            enable_speaker_references=bool(ingest.get("enable_speaker_references")),
        )


def resolve_subject(
    declaration: Declaration, draft: ClaimDraft, stream_id: int, scope: str, event_id: uuid.UUID
) -> tuple[uuid.UUID, str, str | None]:
    """The identity a claim's subject binds to: its id, kind and speaker name.

    Only singular first person binds beyond the message: to the owner's
    identity (one per owner and scope) when declared, or to a named speaker's
    when speaker references are on.  Everything else stays local to the
    event, and nothing ever merges an identity retroactively.
    """
    if draft.subject == "first_person":
        if declaration.first_person_owner:
            return ev.identity_id("owner", stream_id, scope), "owner", None
        if declaration.speaker is not None and declaration.enable_speaker_references:
            name = declaration.speaker.casefold()
            who = ev.identity_id("speaker", stream_id, scope, name)
            return who, "speaker", declaration.speaker
    return ev.identity_id("local", event_id, draft.subject), "event_local", None


def claims_event(
    conn: Connection,
    cipher: SubjectCipher,
    message: RecordedEvent,
    plan: IngestionPlan,
    first_ordinal: int,
    now: datetime,
) -> dict[str, Any]:
    """The data of the claims event of ``message`` (see the module docstring).

    ``conn`` must see every earlier claims event of the stream applied: the
    worker appends and applies one message's event before building the next.
    """
    data = message.data or {}
    declaration = Declaration.of(data)
    effective = effective_at(message)
    event: dict[str, Any] = {
        "source_event_id": str(message.event_id),
        "scope": data["scope"],
        "source_type": data["source_type"],
        "session_id": data.get("session_id"),
        "meta": data.get("meta") or {},
        "extracted_at": now.isoformat(),
        "effective_at": effective,
        "declaration": {
            "first_person_owner": declaration.first_person_owner,
            "speaker": declaration.speaker,
            "enable_speaker_references": declaration.enable_speaker_references,
        },
        "plan": plan.saved(),
    }
    text = data["content"]
    claims = [
        _claim_record(declaration, cipher, message, event, draft, first_ordinal + i, text)
        for i, draft in enumerate(plan.claims)
    ]
    event["claims"] = claims
    event["entities"] = _entities(claims, data["user_id"], first_ordinal + len(claims))
    retirements: list[dict[str, Any]] = []
    unretired: list[dict[str, Any]] = []
    # Claims of this message are written with it, so a later one of its claims
    # sees the earlier ones (and what they retired) here, not in the graph.
    batch = _Siblings()
    for claim, draft in zip(claims, plan.claims, strict=True):
        outcome, retired, candidates = _correction(conn, cipher, event, claim, draft, batch)
        claim["correction"] = outcome
        new = claim_node(event, claim)
        for old in retired:
            retirements.append(
                _retirement(old, new, event, claim["valid_from"], claim["rule"], now)
            )
            batch.retired.add(old.id)
        batch.claims.append((match_key(cipher, event, claim), new))
        if outcome in ("ambiguous", "conditional", "unsupported", "no_match"):
            unretired.append(
                {"node_id": claim["node_id"], "reason": outcome, "candidates": candidates}
            )
    for claim, (_, new) in zip(claims, batch.claims, strict=True):
        later = None if new.id in batch.retired else _later_correction(conn, cipher, event, claim)
        if later is not None:
            ends, rule = later.meta["claim_valid_from"], later.meta["claim_rule"]
            retirements.append(_retirement(new, later, event, ends, rule, now))
    event["retirements"] = retirements
    event["unretired"] = unretired
    return ev.with_checksum(event)


@dataclass
class _Siblings:
    """The claims of the message being published, and the ones they retired."""

    claims: list[tuple[bytes, Node]] = field(default_factory=list)
    retired: set[uuid.UUID] = field(default_factory=set)


def _entities(
    claims: Sequence[Mapping[str, Any]], owner: str, first_ordinal: int
) -> list[dict[str, Any]]:
    """The ENTITY nodes of the identities the claims bind beyond the message.

    One per owner identity (per owner and scope) and per named speaker (per
    name and scope), with the identity's id as node id, so every message
    naming it names the same node.  Event-local subjects have none.  The
    graph creates an entity with the first live message naming it (see
    ``NodeGraphProjection``), so erasing every such message erases it too.
    """
    entities: dict[str, dict[str, Any]] = {}
    for claim in claims:
        kind = claim["subject_kind"]
        if kind == "event_local" or claim["subject_id"] in entities:
            continue
        entities[claim["subject_id"]] = {
            "node_id": claim["subject_id"],
            "ordinal": first_ordinal + len(entities),
            "kind": kind,
            "name": owner if kind == "owner" else claim["speaker"],
        }
    return list(entities.values())


def _claim_record(
    declaration: Declaration,
    cipher: SubjectCipher,
    message: RecordedEvent,
    event: Mapping[str, Any],
    draft: ClaimDraft,
    ordinal: int,
    text: str,
) -> dict[str, Any]:
    subject, kind, speaker = resolve_subject(
        declaration, draft, cipher.stream_id, event["scope"], message.event_id
    )
    return {
        "node_id": str(ev.node_id(message.event_id, ordinal)),
        "ordinal": ordinal,
        "content": text[draft.evidence_start : draft.evidence_end],
        "memory_type": draft.memory_type,
        "subject_id": str(subject),
        "subject_kind": kind,
        "speaker": speaker,
        "predicate": draft.predicate,
        "attribute": draft.attribute,
        "object": draft.object,
        "polarity": draft.polarity,
        "modality": draft.modality,
        "temporal_intent": draft.temporal_intent,
        "replaces_object": draft.replaces_object,
        "conditions": list(draft.conditions),
        "evidence_start": draft.evidence_start,
        "evidence_end": draft.evidence_end,
        "rule": draft.rule,
        "valid_from": event["effective_at"],
        "correction": "none",
    }


def _correction(
    conn: Connection,
    cipher: SubjectCipher,
    event: Mapping[str, Any],
    claim: Mapping[str, Any],
    draft: ClaimDraft,
    batch: _Siblings,
) -> tuple[str, list[Node], list[str]]:
    """What ``claim`` retires: the outcome, the nodes, and the candidates considered."""
    if draft.temporal_intent != "update":
        return "none", [], []
    if draft.conditions:
        return "conditional", [], []
    target = draft.object if draft.polarity == "negative" else draft.replaces_object
    if target is None or draft.modality not in KNOWN_MODALITIES:
        return "unsupported", [], []
    keys = [match_key(cipher, event, claim, cls, eligible=True) for cls in target_classes(draft)]
    effective = datetime.fromisoformat(claim["valid_from"])
    rows = ClaimStore(conn).open_candidates(cipher.stream_id, keys)
    ids = [r.node_id for r in rows if r.valid_from <= effective and r.node_id not in batch.retired]
    priors = _active_nodes(conn, cipher, ids) + [
        node
        for key, node in batch.claims
        if key in keys
        and node.id not in batch.retired
        and datetime.fromisoformat(str(node.meta["claim_valid_from"])) <= effective
    ]
    matched = [n for n in priors if target_matches(target, str(n.meta["claim_object"]))]
    if not matched:
        return "no_match", [], []
    if len(distinct_objects(str(n.meta["claim_object"]) for n in matched)) > 1:
        return "ambiguous", [], sorted(str(n.id) for n in matched)
    return "retired", matched, [str(n.id) for n in matched]


def _active_nodes(conn: Connection, cipher: SubjectCipher, ids: Sequence[uuid.UUID]) -> list[Node]:
    if not ids:
        return []
    rows = GraphStore(conn).node_rows(ids)
    nodes = [node_from_row(cipher, r) for r in rows if r.lifecycle == LifecycleState.ACTIVE]
    return sorted(nodes, key=lambda n: (n.created_at, str(n.id)))


def _later_correction(
    conn: Connection, cipher: SubjectCipher, event: Mapping[str, Any], claim: Mapping[str, Any]
) -> Node | None:
    """The earliest correction already stored, effective after ``claim``, that names it.

    A back-dated message comes after a correction that, had the messages come
    in the order they took effect, would have retired its claim then.  An
    earlier-effective claim never retires a later one; the later correction
    ends the earlier claim instead: it holds until the correction took effect,
    as if told in order.  The correction's own outcome stays what it was.
    """
    if not retirable(claim):
        return None
    effective = datetime.fromisoformat(claim["valid_from"])
    rows = ClaimStore(conn).later_corrections(cipher.stream_id, effective)
    if not rows:
        return None
    own = match_key(cipher, event, claim)
    stored = GraphStore(conn).node_rows([r.node_id for r in rows])
    later = sorted((node_from_row(cipher, r) for r in stored), key=lambda n: (n.occurred_at, n.id))
    for node in later:
        target = _target_of(node)
        named = target is not None and target_matches(target, claim["object"])
        if named and own in _target_keys(cipher, node):
            return node
    return None


def _target_of(correction: Node) -> str | None:
    """What a stored correction's claim names as its target (see ``_correction``)."""
    meta = correction.meta
    if meta["claim_polarity"] == "negative":
        return str(meta["claim_object"])
    replaced = meta["claim_replaces_object"]
    return None if replaced is None else str(replaced)


def _target_keys(cipher: SubjectCipher, correction: Node) -> list[bytes]:
    """The match keys a stored correction's claim looked for its targets under."""
    meta = correction.meta
    source = {"scope": correction.scope.value, "source_type": correction.source_type.value}
    claim = {"subject_id": meta["claim_subject_id"], "memory_type": correction.node_type.value}
    classes = classes_retired_by(
        meta["claim_predicate"], meta["claim_attribute"], correction.node_type.value
    )
    return [match_key(cipher, source, claim, cls, eligible=True) for cls in classes]


def _retirement(
    old: Node, new: Node, event: Mapping[str, Any], ends: str, rule: str, now: datetime
) -> dict[str, Any]:
    """The journaled supersede retiring ``old`` for ``new`` (which took effect at
    ``ends``, by ``rule``): an explicit one's record."""
    operation = ev.operation_id("supersede", old.id, new.id)
    actor = f"extractor:{event['plan']['extractor']}"
    request = {
        "old_node_id": str(old.id),
        "new_node_id": str(new.id),
        "evidence_id": event["source_event_id"],
        "actor_id": actor,
    }
    # The rules retire only claims effective by the successor's time (``ends``).
    retired = replace(
        old,
        lifecycle=LifecycleState.SUPERSEDED,
        superseded_by=new.id,
        updated_at=now,
        valid_to=max(datetime.fromisoformat(ends), old.occurred_at),
    )
    return ev.with_checksum(
        {
            "operation_key": f"supersede:{operation}",
            "request": request,
            "before": _snapshot([old, new]),
            "after": _snapshot([retired, new]),
            **request,
            "valid_to": ends,
            "rule": rule,
        }
    )


def _snapshot(nodes: Sequence[Node]) -> dict[str, Any]:
    return {str(n.id): state_to_json(state_of(n)) for n in nodes}
