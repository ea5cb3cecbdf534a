"""Audit export lines and their offline chain check.

An export line carries everything the integrity chain covers (but no
ciphertext) and its chain link (the chain hash before it), so a holder of the
export can recompute every line's chain hash and see that nothing was
removed, reordered or altered between the first line and the head named in
the signed manifest.  An export of one namespace leaves the other namespaces'
entries out, but carries their content-free chain inputs as gap records (event
id, version, type, schema version, recorded time and ciphertext digest: no
payload, no namespace), so that the whole chain from the first exported line's
link to the signed head can still be recomputed offline.
"""

from __future__ import annotations

import json
import struct
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventstore import crypto
from eventstore.audit_index import AuditQuery
from eventstore.model import RecordedEvent
from eventstore.store import EventStore


@dataclass(frozen=True)
class AuditSlice:
    lines: list[dict[str, Any]]
    previous_chain_hash: str  # chain hash just before the first exported line
    chain_head: str  # head of the audit stream when exported
    head_version: int  # the head's version (0: no entry yet)
    # An export of one namespace: the chain inputs of every entry it leaves out,
    # from its first line to the head.  None for an export of every namespace.
    gaps: list[dict[str, Any]] | None = None


#: ``audit_slice``'s namespace for every entry, of every namespace and of none.
ALL_NAMESPACES = None


def audit_slice(
    store: EventStore,
    since: datetime | None = None,
    until: datetime | None = None,
    namespace: str | None = ALL_NAMESPACES,
    filters: Mapping[str, str] | None = None,
) -> AuditSlice:
    """The audit entries recorded in ``[since, until)`` (of ``namespace`` only, if
    given, and matching ``filters``: ``action``, ``subject_ref``, ``actor_ref``),
    each with its chain link, and the chain's head.

    A slice that leaves entries out between its first line and the head (one
    namespace's, or filtered) carries their chain inputs as gap records.
    """
    query = AuditQuery(namespace, since=since, until=until, **dict(filters or {}))
    gapped = namespace is not ALL_NAMESPACES or bool(query.filters)
    events = store.read_audit()
    link = _genesis(events[0]) if events else crypto.GENESIS_HASH
    chosen: list[dict[str, Any]] = []
    gaps: list[dict[str, Any]] = []
    for event in events:
        if query.matches(event):
            chosen.append(_line(event, link))
        elif chosen and gapped:
            gaps.append(_gap(event))
        link = event.chain_hash
    head = events[-1].chain_hash if events else crypto.GENESIS_HASH
    previous = chosen[0]["previous_chain_hash"] if chosen else link.hex()
    return AuditSlice(
        chosen,
        previous,
        head.hex(),
        events[-1].version if events else 0,
        gaps if gapped else None,
    )


def _namespace(event: RecordedEvent) -> str | None:
    """The namespace an entry happened in; None for the whole store's, and for entries
    written before entries named one."""
    found: str | None = (event.data or {}).get("namespace")
    return found


def _genesis(event: RecordedEvent) -> bytes:
    ref = event.stream
    return crypto.stream_genesis(ref.namespace, ref.subject_key, ref.generation)


def entry_line(event: RecordedEvent) -> dict[str, Any]:
    """An audit entry as an export line holds it, without its chain link."""
    return _gap(event) | {
        "chain_hash": event.chain_hash.hex(),
        "namespace": _namespace(event),
        "entry": event.data,
    }


def _line(event: RecordedEvent, link: bytes) -> dict[str, Any]:
    return entry_line(event) | {"previous_chain_hash": link.hex()}


def _gap(event: RecordedEvent) -> dict[str, Any]:
    """What the chain hashes of an entry left out of an export, and nothing else."""
    return {
        "event_id": str(event.event_id),
        "version": event.version,
        "type": event.type,
        "schema_version": event.schema_version,
        "recorded_at": event.recorded_at.isoformat(),
        "digest": event.digest.hex(),
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


def _recomputed(record: dict[str, Any], link: str) -> str:
    return crypto.chain_hash(
        bytes.fromhex(link),
        uuid.UUID(record["event_id"]),
        record["version"],
        record["type"],
        record["schema_version"],
        datetime.fromisoformat(record["recorded_at"]),
        bytes.fromhex(record["digest"]),
    ).hex()


def gapped_chain_problem(
    lines: Sequence[dict[str, Any]],
    gaps: Sequence[dict[str, Any]],
    chain_head: str,
    head_version: int,
) -> str | None:
    """Recompute the chain of a one-namespace export; the first problem, or ``None``.

    From the first line's chain link, the lines and the gap records (the chain
    inputs of the entries left out) must give every version up to
    ``head_version`` once, in order, each line's link must be the chain hash
    recomputed before it, and the last chain hash must be ``chain_head``.
    """
    if not lines:
        return "gap records without an exported line" if gaps else None
    link = lines[0].get("previous_chain_hash")
    if not isinstance(link, str):
        return f"line for version {lines[0].get('version')} has no chain link"
    version = lines[0]["version"]
    at_line = at_gap = 0
    while at_line < len(lines) or at_gap < len(gaps):
        line = lines[at_line] if at_line < len(lines) else None
        gap = gaps[at_gap] if at_gap < len(gaps) else None
        if line is not None and line.get("version") == version:
            record, is_line = line, True
            at_line += 1
        elif isinstance(gap, dict) and gap.get("version") == version:
            record, is_line = gap, False
            at_gap += 1
        else:
            return f"neither a line nor a gap record holds version {version} (dropped or reordered)"
        if is_line and record.get("previous_chain_hash") != link:
            return (
                f"the chain link of version {version} is not the chain hash recomputed "
                "before it (a line or gap record before it was altered)"
            )
        try:
            link = _recomputed(record, link)
        except (KeyError, TypeError, ValueError, struct.error, OverflowError):
            return f"the {'line' if is_line else 'gap record'} for version {version} is malformed"
        if is_line and link != record.get("chain_hash"):
            return f"chain hash of version {version} does not match"
        version += 1
    if version - 1 != head_version:
        return f"the chain ends at version {version - 1}, not at the signed head {head_version}"
    if link != chain_head:
        return "the recomputed chain does not end at the signed head (a gap record was altered)"
    return None
