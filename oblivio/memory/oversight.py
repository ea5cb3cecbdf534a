"""Read-only views for the people who answer for erasure: erasure requests,
rebuild jobs, scheduler state, time to certificate and the audit trail.

Every figure here is content-free bookkeeping; nothing is decrypted.  The
compliance console renders these; the API's request and certificate routes
use the operations in :mod:`oblivio.memory.compliance`, which these build on.
"""

from __future__ import annotations

import re
import statistics
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from appdata import oversight
from eventstore.audit_index import AuditQuery
from eventstore.erasure import OPEN_STATUSES
from eventstore.errors import InvalidInputError, NotFoundError
from eventstore.exports import audit_slice, chain_problem, entry_line, gapped_chain_problem
from eventstore.ids import parse_uuid
from oblivio.memory import inputs
from oblivio.memory.context import MemoryContext

REQUEST_KINDS = frozenset({"forget", "delete_event", "retention"})
REQUEST_STATUSES = frozenset({*OPEN_STATUSES, "completed", "failed"})


@dataclass(frozen=True)
class RequestSummary:
    """One erasure request as a list shows it."""

    request_id: uuid.UUID
    kind: str
    subject_ref: str
    legal_ground: str
    reason: str
    status: str
    received_at: datetime
    deadline_at: datetime
    completed_at: datetime | None
    overdue: bool
    attempts: int  # the most any one of its jobs made
    max_attempts: int  # each job's limit
    last_error: str | None
    jobs: int
    jobs_done: int
    certificate_id: uuid.UUID | None


@dataclass(frozen=True)
class RequestPage:
    requests: list[RequestSummary]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


def list_erasure_requests(
    ctx: MemoryContext,
    *,
    user_id: str | None = None,
    status: str | None = None,
    kind: str | None = None,
    overdue_only: bool = False,
    page: int = 1,
    per_page: int = 25,
) -> RequestPage:
    """Erasure requests, newest first; ``user_id`` limits them to one person's."""
    if status is not None and status not in REQUEST_STATUSES:
        raise InvalidInputError(f"status must be one of {sorted(REQUEST_STATUSES)}")
    if kind is not None and kind not in REQUEST_KINDS:
        raise InvalidInputError(f"kind must be one of {sorted(REQUEST_KINDS)}")
    offset = inputs.page_offset(page, per_page)
    now = ctx.clock()
    wanted = oversight.RequestFilter(
        namespace=ctx.namespace,
        subject_key=_subject_key(ctx, user_id),
        status=status,
        kind=kind,
        overdue_at=now if overdue_only else None,
    )
    with ctx.store.reading() as view:
        rows, total = oversight.list_requests(view.connection, wanted, per_page, offset)
        jobs = oversight.job_attempts(view.connection, [r.request_id for r in rows])
    summaries = [_summary(r, jobs.get(r.request_id), now) for r in rows]
    return RequestPage(summaries, total, page, per_page)


def erasure_request(
    ctx: MemoryContext, request_id: uuid.UUID | str, *, user_id: str | None = None
) -> RequestSummary:
    """One request; ``NotFoundError`` when unknown or (given ``user_id``) someone else's."""
    wanted = oversight.RequestFilter(
        namespace=ctx.namespace,
        subject_key=_subject_key(ctx, user_id),
        request_id=parse_uuid(request_id, "request id"),
    )
    with ctx.store.reading() as view:
        rows, _ = oversight.list_requests(view.connection, wanted, 1, 0)
        jobs = oversight.job_attempts(view.connection, [r.request_id for r in rows])
    if not rows:
        raise NotFoundError("erasure request is not available")
    return _summary(rows[0], jobs.get(rows[0].request_id), ctx.clock())


def _visible_namespace(ctx: MemoryContext) -> str | None:
    """The namespace whose requests, jobs and audit entries the caller sees; None
    (every one) for a cluster-wide caller."""
    return None if ctx.cluster_wide else ctx.namespace


def _subject_key(ctx: MemoryContext, user_id: str | None) -> bytes | None:
    if user_id is None:
        return None
    return ctx.store.subject_key(ctx.namespace, inputs.user(user_id))


def _summary(row: Any, jobs: Any, now: datetime) -> RequestSummary:
    open_request = row.status in OPEN_STATUSES
    return RequestSummary(
        request_id=row.request_id,
        kind=row.kind,
        subject_ref=row.subject_key.hex(),
        legal_ground=row.legal_ground,
        reason=row.reason,
        status=row.status,
        received_at=row.received_at,
        deadline_at=row.deadline_at,
        completed_at=row.completed_at,
        overdue=row.overdue_at is not None or (open_request and now > row.deadline_at),
        attempts=0 if jobs is None else int(jobs.attempts or 0),
        max_attempts=0 if jobs is None else int(jobs.max_attempts or 0),
        last_error=row.error or (None if jobs is None else jobs.last_error),
        jobs=0 if jobs is None else int(jobs.jobs),
        jobs_done=0 if jobs is None else int(jobs.done or 0),
        certificate_id=row.certificate_id,
    )


# -- health ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RebuildJob:
    job_id: uuid.UUID
    request_id: uuid.UUID
    projection: str
    status: str
    attempts: int
    max_attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    last_error: str | None
    created_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class Lease:
    """A periodic job's lease: held until ``expires_at``, or free since then
    (a finished run releases its lease by setting the expiry to its end)."""

    name: str
    owner: str
    expires_at: datetime
    held: bool


@dataclass(frozen=True)
class ScheduledJob:
    job_id: str
    next_run_at: datetime | None


@dataclass(frozen=True)
class DayFigure:
    """Requests certified on one day and their median time from receipt."""

    day: date
    certified: int
    median_seconds: float | None


def rebuild_jobs(ctx: MemoryContext, limit: int = 50) -> list[RebuildJob]:
    """Unfinished rebuild jobs, then the most recent finished ones."""
    with ctx.store.reading() as view:
        rows = oversight.recent_jobs(view.connection, limit, _visible_namespace(ctx))
    return [
        RebuildJob(
            r.job_id,
            r.request_id,
            r.projection,
            r.status,
            r.attempts,
            r.max_attempts,
            r.lease_owner,
            r.lease_expires_at,
            r.last_error,
            r.created_at,
            r.finished_at,
        )
        for r in rows
    ]


def scheduler_state(ctx: MemoryContext) -> tuple[list[Lease], list[ScheduledJob]]:
    """Periodic jobs' leases (their last runs) and their next run times."""
    now = ctx.clock()
    with ctx.store.reading() as view:
        lease_rows = oversight.leases(view.connection)
        job_rows = oversight.scheduled_jobs(view.connection)
    leases = [Lease(r.name, r.owner, r.expires_at, r.expires_at > now) for r in lease_rows]
    jobs = [
        ScheduledJob(
            r.id, None if r.next_run_time is None else datetime.fromtimestamp(r.next_run_time, UTC)
        )
        for r in job_rows
    ]
    return leases, jobs


def time_to_certificate(ctx: MemoryContext, days: int = 14) -> list[DayFigure]:
    """Per day of the last ``days`` (oldest first): certified requests and the
    median time from receipt to certificate."""
    today = ctx.clock().date()
    first = today - timedelta(days=days - 1)
    since = datetime(first.year, first.month, first.day, tzinfo=UTC)
    with ctx.store.reading() as view:
        rows = oversight.completed_between(view.connection, since, _visible_namespace(ctx))
    durations: dict[date, list[float]] = defaultdict(list)
    for row in rows:
        durations[row.completed_at.date()].append(
            (row.completed_at - row.received_at).total_seconds()
        )
    figures = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        spent = durations.get(day, [])
        figures.append(DayFigure(day, len(spent), statistics.median(spent) if spent else None))
    return figures


# -- audit trail ----------------------------------------------------------------------

_HEX_REF = re.compile(r"[0-9a-f]{64}")
_ACTION = re.compile(r"[a-z][a-z0-9_.]{0,63}")
API_KEY_ID = re.compile(r"[A-Za-z0-9]{1,32}")


@dataclass(frozen=True)
class AuditFilters:
    """The audit page's filters as given (empty strings do not filter)."""

    action: str = ""
    subject: str = ""  # a subject reference (64 hex)
    actor: str = ""  # an actor reference (64 hex) or an API key id
    since: datetime | None = None
    until: datetime | None = None

    @property
    def active(self) -> bool:
        return bool(self.action or self.subject or self.actor or self.since or self.until)


def audit_filters(ctx: MemoryContext, wanted: AuditFilters) -> dict[str, str]:
    """The entry fields ``wanted`` selects on: ``action``, ``subject_ref``, ``actor_ref``.

    An actor is named by its reference or by the API key id that acted (an
    entry records the key's keyed hash, ``api-key:<id>``, never the id itself).
    """
    found: dict[str, str] = {}
    if wanted.action:
        if not _ACTION.fullmatch(wanted.action):
            raise InvalidInputError("action must be a lowercase dotted name, e.g. erasure.forget")
        found["action"] = wanted.action
    if wanted.subject:
        if not _HEX_REF.fullmatch(wanted.subject):
            raise InvalidInputError("a subject reference is 64 lowercase hex digits")
        found["subject_ref"] = wanted.subject
    if wanted.actor:
        found["actor_ref"] = _actor_ref(ctx, wanted.actor)
    if wanted.since and wanted.until and wanted.since >= wanted.until:
        raise InvalidInputError("the time range must end after it starts")
    return found


def _actor_ref(ctx: MemoryContext, actor: str) -> str:
    if _HEX_REF.fullmatch(actor):
        return actor
    if not API_KEY_ID.fullmatch(actor):
        raise InvalidInputError("an actor is an actor reference (64 hex) or an API key id")
    return ctx.store.pseudonym("actor", f"api-key:{actor}")


@dataclass(frozen=True)
class AuditTrail:
    """A page of audit entries (newest first), the chain's head, and (when asked
    for) whether the whole audit chain recomputes."""

    entries: list[dict[str, Any]]
    total: int
    page: int
    per_page: int
    chain_head: str
    head_version: int
    checked: bool
    chain_problem: str | None

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.per_page))


def audit_trail(
    ctx: MemoryContext,
    *,
    page: int = 1,
    per_page: int = 50,
    filters: AuditFilters = AuditFilters(),
    check_chain: bool = False,
) -> AuditTrail:
    """One page of the audit entries the caller may see that match ``filters``,
    newest first, read through the audit index (never the whole stream); with
    ``check_chain`` the whole audit chain is recomputed, as an export's holder would."""
    offset = inputs.page_offset(page, per_page)
    namespace = _visible_namespace(ctx)
    query = AuditQuery(
        namespace, since=filters.since, until=filters.until, **audit_filters(ctx, filters)
    )
    events, total = ctx.store.audit_page(query, per_page, offset)
    head_version, head = ctx.store.audit_head()
    return AuditTrail(
        [entry_line(e) for e in events],
        total,
        page,
        per_page,
        head.hex(),
        head_version,
        check_chain,
        _audit_chain_problem(ctx) if check_chain else None,
    )


def _audit_chain_problem(ctx: MemoryContext) -> str | None:
    """Whether the caller's part of the audit chain recomputes to its head."""
    namespace = _visible_namespace(ctx)
    audit = audit_slice(ctx.store, namespace=namespace)
    problem = chain_problem(audit.lines, None if namespace else audit.previous_chain_hash)
    if problem is None and audit.gaps is not None:
        problem = gapped_chain_problem(
            audit.lines, audit.gaps, audit.chain_head, audit.head_version
        )
    return problem
