"""The data-protection officer's desk: find a person, act on their request,
restrict processing (Art. 18), hold erasure (Art. 17(3)), keep the register.

Every operation here is an operator's, in the operator's namespace, with a
reference (a ticket or letter id, ``[A-Za-z0-9_.:/-]{1,64}``) that goes into
the register and the audit log, and the operator's key as the audit actor.
The person is found by user id, hashed on the server like everywhere else;
nothing here stores or shows the raw id.  The console, the HTTP routes
(``/v1/dpo``) and the CLI (``oblivio dpo``) call these functions.
"""

from __future__ import annotations

import csv
import io
import json
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from appdata import subject_requests as register_sql
from eventstore import AuditEntry, Subject, Transaction
from eventstore import subject_rights as rights
from eventstore.errors import ConflictError, InvalidInputError, NotFoundError
from eventstore.ids import parse_uuid
from eventstore.model import NewEvent
from oblivio.json_text import iso
from oblivio.memory import compliance, inputs
from oblivio.memory.commands import append_projected
from oblivio.memory.context import MemoryContext
from projections.reads import GraphReads
from workers.erasure import ErasureStatus, legal_deadline
from workers.policy import DEFAULT_LEGAL_GROUND

#: Who acts when a caller of the Python API names no one (the HTTP routes and the CLI
#: name the API key and ``cli``).
OPERATOR = "operator"
#: The reference of an export the person took themselves (their own key or console
#: session) or that an operator's key took outside the desk: every subject export is
#: an access request in the register, with or without a ticket behind it.
SELF_SERVICE = "self-service"
API_EXPORT = "api"
#: How far an extension may move the legal deadline: two further months (Art. 12(3)).
EXTENSION_MONTHS = 2


# -- what the desk shows ------------------------------------------------------------------


@dataclass(frozen=True)
class Restriction:
    ground: str
    reference: str
    restricted_at: datetime


@dataclass(frozen=True)
class Hold:
    hold_id: uuid.UUID
    ground: str
    reference: str
    placed_at: datetime


@dataclass(frozen=True)
class MemoryCount:
    scope: str
    node_type: str
    count: int


@dataclass(frozen=True)
class RegisterEntry:
    """One data-subject request as the register holds it."""

    request_id: uuid.UUID
    kind: str
    subject_ref: str
    reference: str | None
    received_at: datetime
    legal_deadline_at: datetime  # the extended one, once extended
    extension_reason: str | None
    operational_deadline_at: datetime
    status: str
    outcome: str | None
    completed_at: datetime | None
    overdue: bool
    erasure_request_id: uuid.UUID | None
    certificate_id: uuid.UUID | None


@dataclass(frozen=True)
class Person:
    """Everything the desk knows of one person, content-free."""

    subject_ref: str
    namespace: str
    holds_data: bool
    memories: list[MemoryCount]
    restriction: Restriction | None
    hold: Hold | None
    requests: list[RegisterEntry]


@dataclass(frozen=True)
class RegisterPage:
    entries: list[RegisterEntry]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


def look_up(ctx: MemoryContext, user_id: str) -> Person:
    """The person ``user_id`` of the caller's namespace: their requests of every kind,
    counts of their current memories by scope and type, restriction and hold."""
    user = inputs.user(user_id)
    key = ctx.store.subject_key(ctx.namespace, user)
    head = ctx.store.head(ctx.namespace, user)
    open_stream = head is not None and head.closed_at is None
    with ctx.store.reading() as view:
        counts = (
            GraphReads(view).current_counts(head.stream.stream_id)
            if head is not None and open_stream
            else []
        )
        restricted = rights.restriction(view.connection, ctx.namespace, key)
        hold = register_sql.active_hold(view.connection, ctx.namespace, key)
        rows, _ = register_sql.list_register(
            view.connection, register_sql.RegisterFilter(ctx.namespace, subject_key=key), None
        )
    now = ctx.clock()
    return Person(
        subject_ref=key.hex(),
        namespace=ctx.namespace,
        holds_data=open_stream,
        memories=[MemoryCount(*c) for c in counts],
        restriction=None
        if restricted is None
        else Restriction(restricted.ground, restricted.reference, restricted.restricted_at),
        hold=None
        if hold is None
        else Hold(uuid.UUID(str(hold.hold_id)), hold.ground, hold.reference, hold.placed_at),
        requests=[_entry(r, now) for r in rows],
    )


# -- acting on a request --------------------------------------------------------------------


def export_for(
    ctx: MemoryContext, user_id: str, *, reference: str, actor_id: str = OPERATOR
) -> tuple[RegisterEntry, dict[str, Any]]:
    """Serve an access/portability request (Art. 15/20): the signed subject export,
    recorded in the register as completed and in the audit log."""
    rights.check_reference(reference)
    exported = compliance.export_subject(ctx, user_id=user_id)
    key = bytes.fromhex(exported["subject_ref"])
    now = ctx.clock()
    with ctx.store.transaction() as tx:
        register_id = _register(ctx, tx, key, "access", reference, actor_id, now)
        register_sql.finish(tx.connection, register_id, "completed", "exported", now)
        _audit(
            ctx,
            tx,
            "subject.export",
            key,
            actor_id,
            reference,
            register_id,
            counts={"events": len(exported["events"]), "nodes": len(exported["nodes"])},
        )
    return entry(ctx, register_id), exported


def forget_for(
    ctx: MemoryContext,
    user_id: str,
    *,
    reference: str,
    actor_id: str = OPERATOR,
    legal_ground: str = DEFAULT_LEGAL_GROUND,
    wait: bool = True,
    timeout: float = compliance.DEFAULT_WAIT_SECONDS,
) -> ErasureStatus:
    """Erase the person on their request (Art. 17), with its reference in the register.

    A held subject's erasure is refused with ``LegalHoldError`` (recorded as refused);
    a restricted subject is erased (erasure overrides restriction) and the
    certificate says the restriction was in place.
    """
    rights.check_reference(reference)
    request_id = ctx.eraser.forget(
        ctx.namespace,
        inputs.user(user_id),
        reason="user_request",
        legal_ground=legal_ground,
        actor_id=actor_id,
        reference=reference,
    )
    return compliance.settle(ctx, request_id, wait, timeout)


def restrict(
    ctx: MemoryContext, user_id: str, *, ground: str, reference: str, actor_id: str = OPERATOR
) -> RegisterEntry:
    """Restrict processing of the person (Art. 18): their memories are kept and
    exportable, but retrieval, extraction and automated decisions leave them alone and
    new writes are refused.  An event in their stream, a register row, an audit entry."""
    rights.check_choice(ground, rights.RESTRICTION_GROUNDS, "ground")
    rights.check_reference(reference)
    user = inputs.user(user_id)
    with ctx.store.transaction() as tx:
        stream = tx.lock_stream(Subject(ctx.namespace, user), create=True)
        key, now = stream.ref.subject_key, ctx.clock()
        if tx.processing_restricted(stream):
            raise ConflictError("processing of this subject is already restricted")
        event = NewEvent(rights.RESTRICTED, {"ground": ground, "reference": reference})
        append_projected(ctx, tx, stream, event)
        tx.restrict(stream, ground, reference, now)
        register_id = _register(ctx, tx, key, "restriction", reference, actor_id, now)
        register_sql.finish(tx.connection, register_id, "completed", "restricted", now)
        _audit(ctx, tx, "subject.restrict", key, actor_id, reference, register_id, ground=ground)
    return entry(ctx, register_id)


def lift_restriction(
    ctx: MemoryContext, user_id: str, *, reference: str, actor_id: str = OPERATOR
) -> None:
    """End the person's restriction of processing: an event in their stream and an
    audit entry (``NotFoundError`` when none is in place)."""
    rights.check_reference(reference)
    user = inputs.user(user_id)
    with ctx.store.transaction() as tx:
        stream = tx.lock_stream(Subject(ctx.namespace, user))
        if stream is None or not tx.processing_restricted(stream):
            raise NotFoundError("processing of this subject is not restricted")
        key = stream.ref.subject_key
        event = NewEvent(rights.RESTRICTION_LIFTED, {"reference": reference})
        append_projected(ctx, tx, stream, event)
        tx.lift_restriction(stream)
        _audit(ctx, tx, "subject.lift_restriction", key, actor_id, reference, None)


def place_hold(
    ctx: MemoryContext, user_id: str, *, ground: str, reference: str, actor_id: str = OPERATOR
) -> Hold:
    """Hold the person's data against erasure (Art. 17(3)): forgets and deletes are
    refused naming ``ground`` and retention sweeps skip them, until the hold is lifted."""
    rights.check_choice(ground, rights.HOLD_GROUNDS, "ground")
    rights.check_reference(reference)
    user = inputs.user(user_id)
    key = ctx.store.subject_key(ctx.namespace, user)
    now = ctx.clock()
    hold_id = uuid.uuid4()
    with ctx.store.transaction() as tx:
        # Under the stream's lock, which an erasure takes before it looks for a hold.
        tx.lock_stream(Subject(ctx.namespace, user))
        if register_sql.active_hold(tx.connection, ctx.namespace, key) is not None:
            raise ConflictError("this subject is already under a legal hold")
        register_sql.place_hold(
            tx.connection,
            {
                "hold_id": hold_id,
                "namespace": ctx.namespace,
                "subject_key": key,
                "ground": ground,
                "reference": reference,
                "placed_at": now,
                "placed_by": _actor_ref(ctx, actor_id),
            },
        )
        _audit(ctx, tx, "subject.hold", key, actor_id, reference, None, ground=ground)
    return Hold(hold_id, ground, reference, now)


def lift_hold(
    ctx: MemoryContext, user_id: str, *, reference: str, actor_id: str = OPERATOR
) -> None:
    """Lift the person's legal hold (``NotFoundError`` when none is in place); refused
    erasures can then be run again."""
    rights.check_reference(reference)
    user = inputs.user(user_id)
    key = ctx.store.subject_key(ctx.namespace, user)
    with ctx.store.transaction() as tx:
        tx.lock_stream(Subject(ctx.namespace, user))
        hold = register_sql.active_hold(tx.connection, ctx.namespace, key)
        if hold is None:
            raise NotFoundError("this subject is not under a legal hold")
        register_sql.lift_hold(tx.connection, hold.hold_id, ctx.clock(), _actor_ref(ctx, actor_id))
        _audit(ctx, tx, "subject.lift_hold", key, actor_id, reference, None, ground=hold.ground)


def extend_deadline(
    ctx: MemoryContext, request_id: uuid.UUID | str, *, reason: str, actor_id: str = OPERATOR
) -> RegisterEntry:
    """Extend a request's legal deadline by two further months (Art. 12(3)), with a
    reason from ``EXTENSION_REASONS``; once."""
    rights.check_choice(reason, rights.EXTENSION_REASONS, "reason")
    found = entry(ctx, request_id)
    if found.extension_reason is not None:
        raise ConflictError("this request's deadline was extended already")
    until = legal_deadline(found.received_at, 1 + EXTENSION_MONTHS)
    with ctx.store.transaction() as tx:
        register_sql.extend(tx.connection, found.request_id, until, reason)
        key = bytes.fromhex(found.subject_ref)
        _audit(
            ctx,
            tx,
            "request.extended",
            key,
            actor_id,
            found.reference,
            found.request_id,
            ground=reason,
        )
    return entry(ctx, found.request_id)


# -- the register ---------------------------------------------------------------------------


def register(
    ctx: MemoryContext,
    *,
    kind: str | None = None,
    status: str | None = None,
    reference: str | None = None,
    overdue_only: bool = False,
    page: int = 1,
    per_page: int = 25,
) -> RegisterPage:
    """The register of data-subject requests of every kind, newest first."""
    offset = inputs.page_offset(page, per_page)
    wanted = _register_filter(ctx, kind, status, reference, overdue_only)
    with ctx.store.reading() as view:
        rows, total = register_sql.list_register(view.connection, wanted, per_page, offset)
    now = ctx.clock()
    return RegisterPage([_entry(r, now) for r in rows], total, page, per_page)


def entry(ctx: MemoryContext, request_id: uuid.UUID | str) -> RegisterEntry:
    """One register entry of the caller's namespace (``NotFoundError`` otherwise)."""
    wanted = register_sql.RegisterFilter(
        ctx.namespace,
        request_id=parse_uuid(request_id, "request id"),
    )
    with ctx.store.reading() as view:
        rows, _ = register_sql.list_register(view.connection, wanted, 1)
    if not rows:
        raise NotFoundError("request is not available")
    return _entry(rows[0], ctx.clock())


REGISTER_COLUMNS = (
    "request_id",
    "kind",
    "subject_ref",
    "reference",
    "received_at",
    "legal_deadline_at",
    "extension_reason",
    "operational_deadline_at",
    "status",
    "outcome",
    "completed_at",
    "overdue",
    "erasure_request_id",
    "certificate_id",
)


def export_register(
    ctx: MemoryContext,
    *,
    format: str = "json",
    kind: str | None = None,
    status: str | None = None,
    overdue_only: bool = False,
) -> str:
    """The whole (filtered) register for an auditor: ``json`` or ``csv``."""
    if format not in ("json", "csv"):
        raise InvalidInputError("format must be json or csv")
    wanted = _register_filter(ctx, kind, status, None, overdue_only)
    with ctx.store.reading() as view:
        rows, _ = register_sql.list_register(view.connection, wanted, None)
    now = ctx.clock()
    records = [_plain(asdict(_entry(r, now))) for r in rows]
    if format == "json":
        return json.dumps(
            {"exported_at": iso(now), "namespace": wanted.namespace, "requests": records},
            indent=2,
        )
    out = io.StringIO()
    writer = csv.DictWriter(out, REGISTER_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(records)
    return out.getvalue()


def _plain(record: dict[str, Any]) -> dict[str, Any]:
    return {
        k: iso(v) if isinstance(v, datetime) else str(v) if isinstance(v, uuid.UUID) else v
        for k, v in record.items()
    }


def _register_filter(
    ctx: MemoryContext,
    kind: str | None,
    status: str | None,
    reference: str | None,
    overdue_only: bool,
) -> register_sql.RegisterFilter:
    if kind is not None and kind not in rights.REQUEST_KINDS:
        raise InvalidInputError(f"kind must be one of {list(rights.REQUEST_KINDS)}")
    if status is not None and status not in rights.REQUEST_STATUSES:
        raise InvalidInputError(f"status must be one of {list(rights.REQUEST_STATUSES)}")
    return register_sql.RegisterFilter(
        ctx.namespace,
        kind=kind,
        status=status,
        reference=None if reference is None else rights.check_reference(reference),
        overdue_at=ctx.clock() if overdue_only else None,
    )


def _entry(row: Any, now: datetime) -> RegisterEntry:
    legal = row.extended_deadline_at or row.legal_deadline_at
    open_now = row.current_status == "open"
    return RegisterEntry(
        request_id=uuid.UUID(str(row.request_id)),
        kind=row.kind,
        subject_ref=row.subject_key.hex(),
        reference=row.reference,
        received_at=row.received_at,
        legal_deadline_at=legal,
        extension_reason=row.extension_reason,
        operational_deadline_at=row.operational_deadline_at,
        status=row.current_status,
        outcome=row.outcome or _erasure_outcome(row),
        completed_at=row.finished_at,
        overdue=row.overdue_at is not None
        or (open_now and (now > row.operational_deadline_at or now > legal)),
        erasure_request_id=row.erasure_request_id,
        certificate_id=row.certificate_id,
    )


def _erasure_outcome(row: Any) -> str | None:
    if row.erasure_status == "completed":
        return "erased"
    if row.erasure_status == "failed":
        return "failed"
    return None


# -- shared steps -----------------------------------------------------------------------------


def _register(
    ctx: MemoryContext,
    tx: Transaction,
    key: bytes,
    kind: str,
    reference: str,
    actor_id: str,
    now: datetime,
) -> uuid.UUID:
    register_id = uuid.uuid4()
    register_sql.register(
        tx.connection,
        {
            "request_id": register_id,
            "namespace": ctx.namespace,
            "subject_key": key,
            "kind": kind,
            "reference": reference,
            "received_at": now,
            "legal_deadline_at": legal_deadline(now),
            "operational_deadline_at": now + ctx.eraser.policy.deadline,
            "status": "open",
            "requested_by": _actor_ref(ctx, actor_id),
        },
    )
    return register_id


def _actor_ref(ctx: MemoryContext, actor_id: str) -> str:
    return ctx.store.pseudonym("actor", actor_id)


def _audit(
    ctx: MemoryContext,
    tx: Transaction,
    action: str,
    key: bytes,
    actor_id: str,
    reference: str | None,
    register_id: uuid.UUID | None,
    *,
    ground: str | None = None,
    counts: dict[str, int] | None = None,
) -> None:
    refs = {"reference": reference, "ground": ground}
    if register_id is not None:
        refs["register_id"] = str(register_id)
    tx.append_audit(
        AuditEntry(
            action,
            namespace=ctx.namespace,
            subject_ref=key.hex(),
            actor_ref=_actor_ref(ctx, actor_id),
            object_refs={k: v for k, v in refs.items() if v is not None},
            counts=counts or {},
        )
    )
