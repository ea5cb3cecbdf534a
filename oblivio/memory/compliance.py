"""Compliance operations: erasure, certificates, subject and audit exports.

Erasure requests are committed synchronously (nothing erased is readable once
the call returns); rebuild and certification happen in workers.  With
``wait=True`` the caller helps those workers along until the certificate is
issued or the timeout passes.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from certificates import VerifiedPayload, canonicalize, sign, verify
from eventstore import RecordedEvent, VerifyReport
from eventstore import erasure as requests
from eventstore.errors import InvalidInputError, NotFoundError
from eventstore.exports import (
    ALL_NAMESPACES,
    audit_slice,
    chain_problem,
    dumps_line,
    gapped_chain_problem,
)
from eventstore.ids import parse_uuid
from oblivio.json_text import iso, plain
from oblivio.memory import inputs
from oblivio.memory.context import MemoryContext
from projections import events as ev
from projections.reads import GraphReads, node_from_row
from workers.erasure import ErasureStatus, request_status
from workers.policy import DEFAULT_LEGAL_GROUND

DEFAULT_WAIT_SECONDS = 10.0
SUBJECT_EXPORT_TYP = "oblivio-subject-export+jws"
AUDIT_EXPORT_TYP = "oblivio-audit-export+jws"
SUBJECT_EXPORT_FORMAT = "oblivio-subject-export/1"
SUBJECT_EXPORT_MEMBERS = frozenset(
    {"format", "exported_at", "namespace", "subject_ref", "events", "nodes", "manifest"}
)


class ExportVerificationError(InvalidInputError):
    """The export does not match its signed manifest."""


def forget(
    ctx: MemoryContext,
    user_id: str,
    *,
    reason: str = "user_request",
    legal_ground: str = DEFAULT_LEGAL_GROUND,
    actor_id: str | None = None,
    wait: bool = True,
    timeout: float = DEFAULT_WAIT_SECONDS,
) -> ErasureStatus:
    """Erase everything of ``user_id`` (GDPR Art. 17); the request status.

    With ``wait=True`` the status carries the signed certificate when it is
    issued within ``timeout`` seconds.  Forgetting an already forgotten
    subject returns the earlier request and its certificate.
    """
    request_id = ctx.eraser.forget(
        ctx.namespace,
        inputs.user(user_id),
        reason=reason,
        legal_ground=legal_ground,
        actor_id=actor_id,
    )
    return _settle(ctx, request_id, wait, timeout)


def delete_event(
    ctx: MemoryContext,
    event_id: uuid.UUID | str,
    *,
    user_id: str | None = None,
    reason: str = "user_request",
    legal_ground: str = DEFAULT_LEGAL_GROUND,
    actor_id: str | None = None,
    wait: bool = False,
    timeout: float = DEFAULT_WAIT_SECONDS,
) -> ErasureStatus:
    """Hard-delete one event; its derived nodes and vectors go with it."""
    request_id = ctx.eraser.delete_event(
        ctx.namespace,
        event_id,
        user_id=user_id,
        reason=reason,
        legal_ground=legal_ground,
        actor_id=actor_id,
    )
    return _settle(ctx, request_id, wait, timeout)


def erasure_status(ctx: MemoryContext, request_id: uuid.UUID | str) -> ErasureStatus:
    """Where an erasure request of this namespace stands (raises ``NotFoundError`` for
    unknown ids and other namespaces' alike)."""
    status = request_status(ctx.store, request_id, ctx.clock(), ctx.namespace)
    if status is None:
        raise NotFoundError("erasure request is not available")
    return status


def _settle(ctx: MemoryContext, request_id: uuid.UUID, wait: bool, timeout: float) -> ErasureStatus:
    deadline = time.monotonic() + timeout
    status = erasure_status(ctx, request_id)
    while wait and status.status not in ("completed", "failed") and time.monotonic() < deadline:
        if not ctx.rebuilder.run_once():
            time.sleep(0.02)
        status = erasure_status(ctx, request_id)
    return status


# -- certificates ---------------------------------------------------------------------


def jwks(ctx: MemoryContext) -> dict[str, Any]:
    """Public keys of every certificate issuer key, retired ones included (RFC 8037)."""
    return ctx.issuer.jwks()


def verify_certificate(
    ctx: MemoryContext,
    certificate: Mapping[str, Any] | str,
    keys: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The verified certificate payload; raises ``CertificateVerificationError`` naming why."""
    verified: VerifiedPayload = verify(certificate, keys if keys is not None else jwks(ctx))
    return dict(verified.payload)


def verify_log(ctx: MemoryContext, *, user_id: str | None = None) -> VerifyReport:
    """Walk the log's integrity chains: every stream, or only ``user_id``'s in this namespace.

    The chains cover ciphertext digests, so they still verify after erasures.  The
    report counts streams and events checked and names the first break, if any
    (``report.ok`` is False then); nothing is raised for a broken chain.
    """
    if user_id is None:
        return ctx.store.verify()
    return ctx.store.verify(ctx.namespace, inputs.user(user_id))


# -- subject export (Art. 15 / 20) ---------------------------------------------------


def export_subject(ctx: MemoryContext, *, user_id: str) -> dict[str, Any]:
    """The subject's readable events and current nodes, with a signed manifest of digests."""
    user = inputs.user(user_id)
    events = [
        _exported_event(e) for e in ctx.store.read_stream(ctx.namespace, user) if not e.erased
    ]
    nodes = _subject_nodes(ctx, user)
    exported: dict[str, Any] = {
        "format": SUBJECT_EXPORT_FORMAT,
        "exported_at": iso(ctx.clock()),
        "namespace": ctx.namespace,
        "subject_ref": ctx.store.subject_ref(ctx.namespace, user),
        "events": events,
        "nodes": nodes,
    }
    exported["manifest"] = sign(
        _subject_manifest(exported), ctx.issuer.active, typ=SUBJECT_EXPORT_TYP
    )
    return exported


def _exported_event(event: RecordedEvent) -> dict[str, Any]:
    """One event of a subject export: a stored memory carries both its times, when
    the log recorded it and when it took effect (``occurred_at``)."""
    exported = {
        "event_id": str(event.event_id),
        "version": event.version,
        "type": event.type,
        "recorded_at": iso(event.recorded_at),
        "data": event.data,
        "metadata": event.metadata,
    }
    if event.type == ev.STORED:
        exported["occurred_at"] = iso(ev.effective_at(event.data or {}, event.recorded_at))
    return exported


def _subject_nodes(ctx: MemoryContext, user: str) -> list[dict[str, Any]]:
    head = ctx.store.head(ctx.namespace, user)
    if head is None or head.closed_at is not None:
        return []
    with ctx.store.reading() as view:
        cipher = view.cipher(head.stream.stream_id)
        if cipher is None:
            return []
        rows = GraphReads(view).stream_nodes(head.stream.stream_id)
        nodes = [node_from_row(cipher, row) for row in rows]
    return [plain(n) for n in nodes]


def _digest(value: Any) -> str:
    return hashlib.sha256(canonicalize(value)).hexdigest()


def _subject_manifest(exported: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "format": exported["format"],
        "exported_at": exported["exported_at"],
        "namespace": exported["namespace"],
        "subject_ref": exported["subject_ref"],
        "counts": {"events": len(exported["events"]), "nodes": len(exported["nodes"])},
        "events_sha256": _digest(exported["events"]),
        "nodes_sha256": _digest(exported["nodes"]),
    }


def verify_subject_export(exported: Mapping[str, Any], keys: Mapping[str, Any]) -> dict[str, Any]:
    """Check a subject export offline against its signed manifest; the manifest."""
    if not isinstance(exported, Mapping) or not set(exported) >= SUBJECT_EXPORT_MEMBERS:
        raise ExportVerificationError(
            "not a subject export: it needs " + ", ".join(sorted(SUBJECT_EXPORT_MEMBERS))
        )
    signed = verify(exported["manifest"], keys, typ=SUBJECT_EXPORT_TYP).payload
    if dict(signed) != _subject_manifest(exported):
        raise ExportVerificationError("the export's content does not match its signed manifest")
    return dict(signed)


# -- audit export ---------------------------------------------------------------------


AUDIT_EXPORT_FORMAT = "oblivio-audit-export/2"


def audit_namespace(ctx: MemoryContext) -> str | None:
    """Whose audit entries the caller sees: its namespace's, or every entry
    (``ALL_NAMESPACES``) for a cluster-wide caller."""
    return ALL_NAMESPACES if ctx.cluster_wide else ctx.namespace


def export_audit(
    ctx: MemoryContext, *, since: datetime | None = None, until: datetime | None = None
) -> str:
    """The audit stream for ``[since, until)`` as JSON Lines, the signed manifest last.

    A namespaced caller gets its namespace's entries only, each with its chain
    link, and the manifest's ``gaps`` carry the chain inputs (no payload, no
    namespace) of the entries left out from the first line to the head; the
    manifest signs the chain's head either way (``namespace`` null: every entry,
    each labelled with its namespace, and no ``gaps``).
    """
    namespace = audit_namespace(ctx)
    audit = audit_slice(ctx.store, since, until, namespace)
    body = "".join(dumps_line(line) + "\n" for line in audit.lines)
    manifest = {
        "format": AUDIT_EXPORT_FORMAT,
        "namespace": namespace,
        "exported_at": iso(ctx.clock()),
        "since": None if since is None else iso(since),
        "until": None if until is None else iso(until),
        "count": len(audit.lines),
        "lines_sha256": hashlib.sha256(body.encode()).hexdigest(),
        "previous_chain_hash": audit.previous_chain_hash,
        "last_chain_hash": audit.lines[-1]["chain_hash"] if audit.lines else None,
        "chain_head": audit.chain_head,
        "head_version": audit.head_version,
    }
    if audit.gaps is not None:
        manifest["gaps"] = audit.gaps
    signed = sign(manifest, ctx.issuer.active, typ=AUDIT_EXPORT_TYP)
    return body + dumps_line({"manifest": signed}) + "\n"


def verify_audit_export(text: str, keys: Mapping[str, Any]) -> dict[str, Any]:
    """Check an audit export offline: signature, line digest, the hash chain and the
    signed head.  A one-namespace export's chain is recomputed through its gap
    records from the first line's link to the signed head."""
    raw_lines = text.splitlines(keepends=True)
    if not raw_lines:
        raise ExportVerificationError("the export is empty")
    try:
        manifest_line = json.loads(raw_lines[-1])
        lines = [json.loads(line) for line in raw_lines[:-1]]
    except json.JSONDecodeError as e:
        raise ExportVerificationError(f"the export is not JSON Lines: {e}") from e
    if not isinstance(manifest_line, dict) or "manifest" not in manifest_line:
        raise ExportVerificationError("the last line must hold the signed manifest")
    manifest = dict(verify(manifest_line["manifest"], keys, typ=AUDIT_EXPORT_TYP).payload)
    body = "".join(raw_lines[:-1])
    if hashlib.sha256(body.encode()).hexdigest() != manifest["lines_sha256"]:
        raise ExportVerificationError("the lines do not match the manifest's digest")
    if len(lines) != manifest["count"]:
        raise ExportVerificationError("the number of lines does not match the manifest")
    problem = _chain_or_head_problem(lines, manifest)
    if problem is not None:
        raise ExportVerificationError(f"the hash chain is broken: {problem}")
    last = lines[-1]["chain_hash"] if lines else None
    if last != manifest["last_chain_hash"]:
        raise ExportVerificationError("the last line is not the one the manifest names")
    return manifest


def _chain_or_head_problem(lines: list[dict[str, Any]], manifest: Mapping[str, Any]) -> str | None:
    """The first problem of the lines' chain, their namespaces or the signed head.

    An export of one namespace (``namespace`` set) leaves other entries out: the
    chain runs through its signed gap records up to the signed head.  One made
    before exports carried gap records has each line checked against its own link.
    """
    namespace = manifest.get("namespace")
    filtered = namespace is not None
    gaps = manifest.get("gaps")
    if filtered and gaps is not None:
        if not isinstance(gaps, list):
            return "the manifest's gap records are not a list"
        problem = chain_problem(lines, None) or gapped_chain_problem(
            lines, gaps, manifest["chain_head"], manifest["head_version"]
        )
    else:
        problem = chain_problem(lines, None if filtered else manifest["previous_chain_hash"])
    if problem is None and filtered and any(line["namespace"] != namespace for line in lines):
        problem = "a line of another namespace is in a one-namespace export"
    return problem or _head_problem(lines, manifest)


def _head_problem(lines: list[dict[str, Any]], manifest: Mapping[str, Any]) -> str | None:
    """Whether the lines end at or before the signed head, and its line is the head."""
    head_version = manifest.get("head_version")
    if head_version is None:  # an export made before manifests named the head's version
        return None
    for line in lines:
        if line["version"] > head_version:
            return f"version {line['version']} is past the signed head"
        if line["version"] == head_version and line["chain_hash"] != manifest["chain_head"]:
            return "the head's line is not the signed head"
    return None


def get_certificate(ctx: MemoryContext, certificate_id: uuid.UUID | str) -> dict[str, Any]:
    """A stored certificate (JWS JSON serialization) of this namespace by id."""
    wanted = parse_uuid(certificate_id, "certificate id")
    with ctx.store.reading() as view:
        row = requests.get_certificate(view.connection, wanted, ctx.namespace)
    if row is None:
        raise NotFoundError("certificate is not available")
    certificate: dict[str, Any] = json.loads(row.jws)
    return certificate
