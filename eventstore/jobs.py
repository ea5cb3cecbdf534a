"""The rebuild job queue: jobs in the database, claimed with leases.

A claim is one statement: pick the oldest runnable job (queued and due, or
running with an expired lease, i.e. its worker died) and mark it running for
this worker until the lease expires.  On PostgreSQL the pick uses ``FOR
UPDATE SKIP LOCKED``, so concurrent workers never claim the same job and
never wait on each other.  SQLite ignores the locking clause; its single
writer (``BEGIN IMMEDIATE``) makes the same statement exclusive.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.model import START, LogCursor
from eventstore.schema import erasure_requests, events, rebuild_jobs

JobRow = sa.Row[Any]


def enqueue(
    conn: Connection,
    request_id: uuid.UUID,
    projections: Sequence[tuple[str, int]],
    stream_id: int | None,
    now: datetime,
    max_attempts: int,
) -> list[uuid.UUID]:
    """One queued job per (projection name, version)."""
    job_ids = [uuid.uuid4() for _ in projections]
    rows: list[dict[str, Any]] = [
        {
            "job_id": job_id,
            "request_id": request_id,
            "projection": name,
            "projection_version": version,
            "stream_id": stream_id,
            "status": "queued",
            "attempts": 0,
            "max_attempts": max_attempts,
            "run_after": now,
            "created_at": now,
        }
        for job_id, (name, version) in zip(job_ids, projections, strict=True)
    ]
    conn.execute(rebuild_jobs.insert(), rows)
    return job_ids


def claim(conn: Connection, worker: str, now: datetime, lease: timedelta) -> JobRow | None:
    """Take the next runnable job for ``worker`` (see module docstring)."""
    runnable = sa.or_(
        sa.and_(rebuild_jobs.c.status == "queued", rebuild_jobs.c.run_after <= now),
        sa.and_(rebuild_jobs.c.status == "running", rebuild_jobs.c.lease_expires_at < now),
    )
    pick = (
        sa.select(rebuild_jobs.c.job_id)
        .where(runnable)
        .order_by(rebuild_jobs.c.run_after, rebuild_jobs.c.created_at)
        .limit(1)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    stmt = (
        rebuild_jobs.update()
        .where(rebuild_jobs.c.job_id == pick)
        .values(
            status="running",
            lease_owner=worker,
            lease_expires_at=now + lease,
            attempts=rebuild_jobs.c.attempts + 1,
        )
        .returning(*rebuild_jobs.c)
    )
    return conn.execute(stmt).first()


def heartbeat(
    conn: Connection, job_id: uuid.UUID, worker: str, now: datetime, lease: timedelta
) -> bool:
    """Extend ``worker``'s lease on a running job to ``now + lease``; False if it is not ours.

    A worker beats while it works, so a live worker keeps its job however long
    the rebuild takes, and a dead one loses it one lease after its last beat.
    """
    result = conn.execute(
        rebuild_jobs.update()
        .where(
            rebuild_jobs.c.job_id == job_id,
            rebuild_jobs.c.lease_owner == worker,
            rebuild_jobs.c.status == "running",
        )
        .values(lease_expires_at=now + lease)
    )
    return result.rowcount == 1


def get(conn: Connection, job_id: uuid.UUID, *, lock: bool = False) -> JobRow | None:
    query = sa.select(rebuild_jobs).where(rebuild_jobs.c.job_id == job_id)
    if lock:
        query = query.with_for_update()
    return conn.execute(query).first()


def finish(conn: Connection, job_id: uuid.UUID, worker: str, now: datetime, **results: Any) -> bool:
    """Mark a job done, only if ``worker`` still holds it; False if the lease was lost."""
    result = conn.execute(
        rebuild_jobs.update()
        .where(
            rebuild_jobs.c.job_id == job_id,
            rebuild_jobs.c.lease_owner == worker,
            rebuild_jobs.c.status == "running",
        )
        .values(status="done", finished_at=now, lease_expires_at=None, **results)
    )
    return result.rowcount == 1


def retry_or_fail(
    conn: Connection,
    job_id: uuid.UUID,
    worker: str,
    error: str,
    run_after: datetime,
    now: datetime,
) -> str | None:
    """After a failed attempt: requeue with backoff, or fail for good; the new status."""
    job = get(conn, job_id, lock=True)
    if job is None or job.lease_owner != worker or job.status != "running":
        return None
    status = "failed" if job.attempts >= job.max_attempts else "queued"
    conn.execute(
        rebuild_jobs.update()
        .where(rebuild_jobs.c.job_id == job_id)
        .values(
            status=status,
            last_error=error[:500],
            run_after=run_after,
            lease_owner=None,
            lease_expires_at=None,
            finished_at=now if status == "failed" else None,
        )
    )
    return status


def expired_to_failed(conn: Connection, now: datetime) -> list[JobRow]:
    """Fail jobs whose lease expired on their last allowed attempt (the lease reaper)."""
    stmt = (
        rebuild_jobs.update()
        .where(
            rebuild_jobs.c.status == "running",
            rebuild_jobs.c.lease_expires_at < now,
            rebuild_jobs.c.attempts >= rebuild_jobs.c.max_attempts,
        )
        .values(
            status="failed",
            last_error="lease expired on the last attempt",
            finished_at=now,
            lease_owner=None,
            lease_expires_at=None,
        )
        .returning(*rebuild_jobs.c)
    )
    return list(conn.execute(stmt))


def stream_cursor(conn: Connection, stream_id: int) -> LogCursor:
    """The log cursor of a stream's last event (``START`` if it has none): a job's position.

    One row through the ``(stream_id, version)`` key instead of decoding the
    whole stream, which for a forgotten subject is a thousand tombstones.
    """
    row = conn.execute(
        sa.select(events.c.commit_group, events.c.position)
        .where(events.c.stream_id == stream_id)
        .order_by(events.c.version.desc())
        .limit(1)
    ).first()
    return START if row is None else LogCursor(row.commit_group, row.position)


def of_request(conn: Connection, request_id: uuid.UUID) -> list[JobRow]:
    query = (
        sa.select(rebuild_jobs)
        .where(rebuild_jobs.c.request_id == request_id)
        .order_by(rebuild_jobs.c.projection)
    )
    return list(conn.execute(query))


def jobs_by_status(conn: Connection, namespace: str | None) -> dict[tuple[str, str], int]:
    """How many rebuild jobs are in each (namespace of their request, status) (for
    metrics), of one namespace or (None) of all."""
    by = (erasure_requests.c.namespace, rebuild_jobs.c.status)
    query = (
        sa.select(*by, sa.func.count())
        .join(erasure_requests, erasure_requests.c.request_id == rebuild_jobs.c.request_id)
        .where(sa.true() if namespace is None else erasure_requests.c.namespace == namespace)
        .group_by(*by)
    )
    return {(ns, status): int(count) for ns, status, count in conn.execute(query)}
