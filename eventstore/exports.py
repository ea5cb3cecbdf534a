"""Audit export lines and their offline chain check.

An export line carries everything the integrity chain covers (but no
ciphertext) and its chain link (the chain hash before it), so a holder of the
export can recompute every line's chain hash and see that nothing was
removed, reordered or altered between the first line and the head named in
the signed manifest.  An export of one namespace skips the other namespaces'
entries: each line is then checked against its own link, lines of
consecutive versions against each other, and the head's line against the
signed head.
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
    head_version: int  # the head's version (0: no entry yet)


#: ``audit_slice``'s namespace for every entry, of every namespace and of none.
ALL_NAMESPACES = None


def audit_slice(
    store: EventStore,
    since: datetime | None = None,
    until: datetime | None = None,
    namespace: str | None = ALL_NAMESPACES,
) -> AuditSlice:
    """The audit entries recorded in ``[since, until)`` (of ``namespace`` only, if
    given), each with its chain link, and the chain's head."""
    events = store.read_audit()
    link = _genesis(events[0]) if events else crypto.GENESIS_HASH
    chosen: list[dict[str, Any]] = []
    for event in events:
        inside = (since is None or event.recorded_at >= since) and (
            until is None or event.recorded_at < until
        )
        if inside and (namespace is ALL_NAMESPACES or _namespace(event) == namespace):
            chosen.append(_line(event, link))
        link = event.chain_hash
    head = events[-1].chain_hash if events else crypto.GENESIS_HASH
    previous = chosen[0]["previous_chain_hash"] if chosen else link.hex()
    return AuditSlice(chosen, previous, head.hex(), events[-1].version if events else 0)


def _namespace(event: RecordedEvent) -> str | None:
    """The namespace an entry happened in; None for the whole store's, and for entries
    written before entries named one."""
    found: str | None = (event.data or {}).get("namespace")
    return found


def _genesis(event: RecordedEvent) -> bytes:
    ref = event.stream
    return crypto.stream_genesis(ref.namespace, ref.subject_key, ref.generation)


def _line(event: RecordedEvent, link: bytes) -> dict[str, Any]:
    return {
        "event_id": str(event.event_id),
        "version": event.version,
        "type": event.type,
        "schema_version": event.schema_version,
        "recorded_at": event.recorded_at.isoformat(),
        "digest": event.digest.hex(),
        "previous_chain_hash": link.hex(),
        "chain_hash": event.chain_hash.hex(),
        "namespace": _namespace(event),
        "entry": event.data,
    }


def dumps_line(line: dict[str, Any]) -> str:
    return json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def chain_problem(lines: Sequence[dict[str, Any]], previous_chain_hash: str | None) -> str | None:
    """Recompute the chain over exported lines; the first problem, or ``None``.

    With ``previous_chain_hash`` the lines must be a run of consecutive entries
    following that hash.  Without it (an export of one namespace, which skips
    other namespaces' entries) each line is checked against its own chain link,
    and lines of consecutive versions against each other.
    """
    contiguous = previous_chain_hash is not None
    last: tuple[int, str] | None = None  # version and chain hash of the line before
    for line in lines:
        version = line["version"]
        if last is not None and (version <= last[0] or (contiguous and version != last[0] + 1)):
            return f"line for version {version} follows version {last[0]}"
        if last is None:
            expected = previous_chain_hash
        else:
            expected = last[1] if version == last[0] + 1 else None
        # Exports made before lines carried their link chain from the line before.
        link = line.get("previous_chain_hash", expected)
        if link is None:
            return f"line for version {version} has no chain link"
        if expected is not None and link != expected:
            return f"the chain link of version {version} is not the chain hash before it"
        recomputed = crypto.chain_hash(
            bytes.fromhex(link),
            uuid.UUID(line["event_id"]),
            version,
            line["type"],
            line["schema_version"],
            datetime.fromisoformat(line["recorded_at"]),
            bytes.fromhex(line["digest"]),
        )
        if recomputed.hex() != line["chain_hash"]:
            return f"chain hash of version {version} does not match"
        last = (version, line["chain_hash"])
    return None
