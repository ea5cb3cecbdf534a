"""Read-only SQL behind the compliance console's lists: erasure requests,
rebuild jobs, scheduler leases and periodic jobs.

Everything read here is content-free bookkeeping (subject keys, statuses,
times, counts), so listing it decrypts nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from appdata.tables import apscheduler_jobs, scheduler_leases
from eventstore.erasure import OPEN_STATUSES, in_namespace
from eventstore.schema import erasure_requests, rebuild_jobs

Row = sa.Row[Any]


@dataclass(frozen=True)
class RequestFilter:
    """Which erasure requests a list shows; ``None`` fields do not filter."""

    namespace: str
    subject_key: bytes | None = None
    request_id: uuid.UUID | None = None
    status: str | None = None
    kind: str | None = None
    overdue_at: datetime | None = None  # only requests overdue at this time


def _filtered(query: sa.Select[Any], wanted: RequestFilter) -> sa.Select[Any]:
    table = erasure_requests
    query = query.where(table.c.namespace == wanted.namespace)
    if wanted.request_id is not None:
        query = query.where(table.c.request_id == wanted.request_id)
    if wanted.subject_key is not None:
        query = query.where(table.c.subject_key == wanted.subject_key)
    if wanted.status is not None:
        query = query.where(table.c.status == wanted.status)
    if wanted.kind is not None:
        query = query.where(table.c.kind == wanted.kind)
    if wanted.overdue_at is not None:
        query = query.where(
            sa.or_(
                table.c.overdue_at.is_not(None),
                sa.and_(table.c.status.in_(OPEN_STATUSES), table.c.deadline_at < wanted.overdue_at),
            )
        )
    return query


def list_requests(
    conn: Connection, wanted: RequestFilter, limit: int, offset: int
) -> tuple[list[Row], int]:
    """One page of requests, newest first, and how many match in all."""
    total = conn.execute(
        _filtered(sa.select(sa.func.count()).select_from(erasure_requests), wanted)
    ).scalar_one()
    page = conn.execute(
        _filtered(sa.select(erasure_requests), wanted)
        .order_by(erasure_requests.c.received_at.desc(), erasure_requests.c.request_id)
        .limit(limit)
        .offset(offset)
    )
    return list(page), int(total)


def job_attempts(conn: Connection, request_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Row]:
    """Per request: the most attempts any one of its jobs made (each job retries on its
    own, so a sum would count two jobs' first tries as a second attempt), the job
    limit, and the latest job error."""
    if not request_ids:
        return {}
    jobs = rebuild_jobs.c
    rows = conn.execute(
        sa.select(
            jobs.request_id,
            sa.func.max(jobs.attempts).label("attempts"),
            sa.func.max(jobs.max_attempts).label("max_attempts"),
            sa.func.max(jobs.last_error).label("last_error"),
            sa.func.count().label("jobs"),
            sa.func.sum(sa.case((jobs.status == "done", 1), else_=0)).label("done"),
        )
        .where(jobs.request_id.in_(list(request_ids)))
        .group_by(jobs.request_id)
    )
    return {uuid.UUID(str(r.request_id)): r for r in rows}


def recent_jobs(conn: Connection, limit: int, namespace: str | None) -> list[Row]:
    """Unfinished rebuild jobs first, then the latest finished ones (of erasure
    requests of ``namespace``; of all for None)."""
    unfinished = sa.case((rebuild_jobs.c.status.in_(("queued", "running")), 0), else_=1)
    query = (
        sa.select(rebuild_jobs)
        .join(erasure_requests, erasure_requests.c.request_id == rebuild_jobs.c.request_id)
        .where(in_namespace(namespace))
        .order_by(unfinished, rebuild_jobs.c.created_at.desc())
        .limit(limit)
    )
    return list(conn.execute(query))


def completed_between(conn: Connection, since: datetime, namespace: str | None) -> list[Row]:
    """(received_at, completed_at) of requests (of ``namespace``; of all for None)
    completed since ``since``."""
    query = sa.select(erasure_requests.c.received_at, erasure_requests.c.completed_at).where(
        erasure_requests.c.status == "completed",
        erasure_requests.c.completed_at >= since,
        in_namespace(namespace),
    )
    return list(conn.execute(query))


def leases(conn: Connection) -> list[Row]:
    """Named leases of periodic jobs (an expiry in the past: free since then)."""
    return list(conn.execute(sa.select(scheduler_leases).order_by(scheduler_leases.c.name)))


def scheduled_jobs(conn: Connection) -> list[Row]:
    """APScheduler's persisted jobs: id and next run time (epoch seconds)."""
    query = sa.select(apscheduler_jobs.c.id, apscheduler_jobs.c.next_run_time).order_by(
        apscheduler_jobs.c.id
    )
    return list(conn.execute(query))
