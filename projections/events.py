"""The memory event types and their payloads.

Every change to memory is one of these events in the subject's stream; the
projections are functions of them.  Payloads carry the *result* of each
decision (the after-state), so replaying them never re-runs a rule that may
have changed since.  Snapshots hold node state but never node content: the
content lives only in its source event, so erasing that event erases it.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import datetime
from typing import Any, Final

STORED: Final = "memory.stored"
SUPERSEDED: Final = "memory.superseded"
CONTRADICTED: Final = "memory.contradicted"
CONTRADICTION_RESOLVED: Final = "memory.contradiction_resolved"
REINFORCED: Final = "memory.reinforced"
# The archiving job's decision: nodes leave default retrieval (not erasure;
# see workers.archiving).  Its after-states carry each node's archived_at.
ARCHIVED: Final = "memory.archived"
# The same job's decision that archived nodes come back (their archived_at cleared).
UNARCHIVED: Final = "memory.unarchived"
TRIGGER_ADDED: Final = "retrieval.trigger_added"
TRIGGER_REMOVED: Final = "retrieval.trigger_removed"
ATTRACTOR_ADDED: Final = "retrieval.attractor_added"
ATTRACTORS_CLEARED: Final = "retrieval.attractors_cleared"
# The saved ingestion plan of one ingested message: its claims and the
# retirements they caused (see projections.claims).
CLAIMS_EXTRACTED: Final = "memory.claims_extracted"
# A keyed item's revision gets a new expiry (a TTL refreshed on read); the
# revision itself is a memory.stored event whose payload names the item.
ITEM_EXPIRY: Final = "memory.item_expiry"
# The likely-update detector's decision that a newer memory of the person likely
# updates an older one (projections.updates, workers.updates): content-free (node
# ids, cues, rule and version, confidence).  Confirming it is an explicit
# memory.superseded; rejecting it is the next event, after which both stand.
LIKELY_UPDATE: Final = "memory.likely_update"
LIKELY_UPDATE_REJECTED: Final = "memory.likely_update_rejected"

# Before the items index (pj0006), OblivioStore kept an item as a plain stored
# memory whose metadata names it: the item key in "doc.locator", its expiry
# (ISO text) in "doc.expires_at".  Such events are items too (item_of).
LEGACY_ITEM_KEY: Final = "doc.locator"
LEGACY_ITEM_EXPIRY: Final = "doc.expires_at"

MEMORY_EVENT_TYPES: Final = frozenset(
    {
        STORED,
        SUPERSEDED,
        CONTRADICTED,
        CONTRADICTION_RESOLVED,
        REINFORCED,
        ARCHIVED,
        UNARCHIVED,
        TRIGGER_ADDED,
        TRIGGER_REMOVED,
        ATTRACTOR_ADDED,
        ATTRACTORS_CLEARED,
        CLAIMS_EXTRACTED,
        ITEM_EXPIRY,
        LIKELY_UPDATE,
        LIKELY_UPDATE_REJECTED,
    }
)

# Namespaces for the deterministic ids derived from events (uuid5), so that
# replaying the log reproduces exactly the same node, edge and operation ids.
NODE_IDS: Final = uuid.UUID("6f1d7c1e-3c55-4f0e-9a51-0b6a0d0e5a01")
EDGE_IDS: Final = uuid.UUID("6f1d7c1e-3c55-4f0e-9a51-0b6a0d0e5a02")
OPERATION_IDS: Final = uuid.UUID("6f1d7c1e-3c55-4f0e-9a51-0b6a0d0e5a03")
PLAN_IDS: Final = uuid.UUID("6f1d7c1e-3c55-4f0e-9a51-0b6a0d0e5a04")
IDENTITY_IDS: Final = uuid.UUID("6f1d7c1e-3c55-4f0e-9a51-0b6a0d0e5a05")
UPDATE_IDS: Final = uuid.UUID("6f1d7c1e-3c55-4f0e-9a51-0b6a0d0e5a06")


def node_id(event_id: uuid.UUID, ordinal: int) -> uuid.UUID:
    """The id of the ``ordinal``-th node extracted from an event."""
    return uuid.uuid5(NODE_IDS, f"{event_id}/{ordinal}")


def plan_event_id(source_event_id: uuid.UUID) -> uuid.UUID:
    """The id of the claims event derived from an ingested message.

    A function of the message alone, so erasing the message finds (and
    erases) its plan without reading, and the extraction worker's append of
    it is idempotent.
    """
    return uuid.uuid5(PLAN_IDS, str(source_event_id))


def likely_update_event_id(source_event_id: uuid.UUID) -> uuid.UUID:
    """The id of the likely-update decision about a stored memory (one at most per
    memory): a function of the memory alone, so the detector's append of it is
    idempotent and erasing the memory finds the decision without reading."""
    return uuid.uuid5(UPDATE_IDS, str(source_event_id))


def derived_event_ids(event_id: uuid.UUID) -> list[uuid.UUID]:
    """Events whose content derives from ``event_id`` and go when it goes."""
    return [plan_event_id(event_id), likely_update_event_id(event_id)]


def identity_id(*parts: object) -> uuid.UUID:
    """A resolved subject identity of claims (owner, named speaker or event-local)."""
    return uuid.uuid5(IDENTITY_IDS, "/".join(map(str, parts)))


def edge_id(kind: str, source: uuid.UUID, target: uuid.UUID, event_id: uuid.UUID) -> uuid.UUID:
    return uuid.uuid5(EDGE_IDS, f"{kind}/{source}/{target}/{event_id}")


def operation_id(kind: str, *parts: object) -> uuid.UUID:
    """Operation ids derived from what the operation acts on, in order."""
    return uuid.uuid5(OPERATION_IDS, "/".join([kind, *map(str, parts)]))


def checksum(record: dict[str, Any]) -> str:
    """SHA-256 over the canonical JSON of a journal record (without its checksum)."""
    body = {k: v for k, v in record.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def with_checksum(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "checksum": checksum(record)}


def checksum_ok(record: dict[str, Any]) -> bool:
    return record.get("checksum") == checksum(record)


def item_of(data: dict[str, Any]) -> tuple[str, str | None] | None:
    """The item a memory.stored payload revises, as (key, expiry in ISO text), if any."""
    item = data.get("item")
    if item is not None:
        return str(item["key"]), item.get("expires_at")
    meta = data.get("meta") or {}
    key, expires_at = meta.get(LEGACY_ITEM_KEY), meta.get(LEGACY_ITEM_EXPIRY)
    if not isinstance(key, str):
        return None
    return key, expires_at if isinstance(expires_at, str) else None


def effective_at(data: dict[str, Any], recorded_at: datetime) -> datetime:
    """When a memory.stored payload's statement took effect (its effective time).

    ``occurred_at`` as the caller gave it to ``store``/``put_item`` (or to
    ``ingest``, which keeps it under ``ingest``); without one, when the log
    recorded the event.  Validity intervals, recency and ``as_of`` use this
    time; the log's order and retention sweeps keep the recorded one.
    """
    given = data.get("occurred_at") or (data.get("ingest") or {}).get("occurred_at")
    return recorded_at if not given else datetime.fromisoformat(str(given))
