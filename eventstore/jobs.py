"""The rebuild job queue: jobs in the database, claimed with leases.

Claims, heartbeats and releases are :mod:`eventstore.leased_work`'s: the
oldest runnable job (queued and past its backoff, or running with an expired
lease, i.e. its worker died) is marked running for one worker until its lease
expires.  This module adds what is particular to erasure rebuilds: one job per
projection of a request, their results, and the lease reaper.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.leased_work import LeasedQueue
from eventstore.model import START, LogCursor
from eventstore.schema import erasure_requests, events, rebuild_jobs

JobRow = sa.Row[Any]

#: This queue's kind of leased work.
KIND = "erasure"

#: Rebuild jobs run in the order they became due, each once its backoff has passed.
QUEUE = LeasedQueue(
    KIND,
    key=("job_id",),
    order=(rebuild_jobs.c.run_after, rebuild_jobs.c.created_at),
    due="run_after",
)


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
            "kind": KIND,
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
    """Take the next runnable job for ``worker`` (see :mod:`eventstore.leased_work`)."""
    row: JobRow | None = QUEUE.claim(conn, worker, now, lease)
    return row


def heartbeat(
    conn: Connection, job_id: uuid.UUID, worker: str, now: datetime, lease: timedelta
) -> bool:
    """Extend ``worker``'s lease on a running job to ``now + lease``; False if it is not ours."""
    return QUEUE.heartbeat(conn, (job_id,), worker, now, lease)


def get(conn: Connection, job_id: uuid.UUID, *, lock: bool = False) -> JobRow | None:
    query = sa.select(rebuild_jobs).where(rebuild_jobs.c.job_id == job_id)
    if lock:
        query = query.with_for_update()
    return conn.execute(query).first()


def finish(conn: Connection, job_id: uuid.UUID, worker: str, now: datetime, **results: Any) -> bool:
    """Mark a job done, only if ``worker`` still holds it; False if the lease was lost."""
    return QUEUE.finish(conn, (job_id,), worker, now, **results)


def retry_or_fail(
    conn: Connection,
    job_id: uuid.UUID,
    worker: str,
    error: str,
    run_after: datetime,
    now: datetime,
    *,
    spent: bool = True,
) -> str | None:
    """After a failed attempt: requeue with backoff, or fail for good; the new status.

    ``spent=False`` gives the attempt back (the job is requeued whatever its count):
    for an attempt the database could not complete, which says nothing about the job.
    """
    job = QUEUE.held(conn, (job_id,), worker)
    if job is None:
        return None
    failed = spent and job.attempts >= job.max_attempts
    QUEUE.release(
        conn,
        (job_id,),
        worker,
        error,
        failed=failed,
        run_after=run_after,
        finished_at=now if failed else None,
        attempts=job.attempts if spent else job.attempts - 1,
    )
    return "failed" if failed else "queued"


def expired_to_failed(conn: Connection, now: datetime) -> list[JobRow]:
    """Fail jobs whose lease expired on their last allowed attempt (the lease reaper)."""
    return QUEUE.reap(conn, now)


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
