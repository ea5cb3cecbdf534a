"""Audit export lines and their offline chain check.

An export line carries everything the integrity chain covers (but no
ciphertext), so a holder of the export can recompute every chain hash and
see that nothing was removed, reordered or altered between the first line
and the head named in the signed manifest.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventstore import crypto
from eventstore.model import RecordedEvent
from eventstore.store import EventStore


@dataclass(frozen=True)
class AuditSlice:
    lines: list[dict[str, Any]]
    previous_chain_hash: str  # chain hash just before the first exported line
    chain_head: str  # head of the audit stream when exported


def audit_slice(
    store: EventStore, since: datetime | None = None, until: datetime | None = None
) -> AuditSlice:
    """The audit entries recorded in ``[since, until)``, with chain context."""
    events = store.read_audit()
    previous = _genesis(events[0]) if events else crypto.GENESIS_HASH
    chosen: list[RecordedEvent] = []
    for event in events:
        if since is not None and event.recorded_at < since:
            previous = event.chain_hash
            continue
        if until is not None and event.recorded_at >= until:
            break
        chosen.append(event)
    head = events[-1].chain_hash if events else crypto.GENESIS_HASH
    return AuditSlice([_line(e) for e in chosen], previous.hex(), head.hex())


def _genesis(event: RecordedEvent) -> bytes:
    ref = event.stream
    return crypto.stream_genesis(ref.namespace, ref.subject_key, ref.generation)


def _line(event: RecordedEvent) -> dict[str, Any]:
    return {
        "event_id": str(event.event_id),
        "version": event.version,
        "type": event.type,
        "schema_version": event.schema_version,
        "recorded_at": event.recorded_at.isoformat(),
        "digest": event.digest.hex(),
        "chain_hash": event.chain_hash.hex(),
        "entry": event.data,
    }


def dumps_line(line: dict[str, Any]) -> str:
    return json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_problem(lines: Sequence[dict[str, Any]], previous_chain_hash: str) -> str | None:
    """Recompute the chain over exported lines; the first problem, or ``None``."""
    chain = bytes.fromhex(previous_chain_hash)
    expected_version = None
    for line in lines:
        if expected_version is not None and line["version"] != expected_version:
            return f"line for version {line['version']} follows version {expected_version - 1}"
        recomputed = crypto.chain_hash(
            chain,
            uuid.UUID(line["event_id"]),
            line["version"],
            line["type"],
            line["schema_version"],
            datetime.fromisoformat(line["recorded_at"]),
            bytes.fromhex(line["digest"]),
        )
        if recomputed.hex() != line["chain_hash"]:
            return f"chain hash of version {line['version']} does not match"
        chain = recomputed
        expected_version = line["version"] + 1
    return None
