"""SQL of snapshot builds: leased work of kind ``snapshot``, one item per (stream, projection).

A build replays a stream and keeps the replay's item digests as the stream's
snapshot (projections.proofs), so that a certified delete replays only its part
even when it is the person's first.  Builds are rows of the one table of leased
work (``rebuild_jobs``; the job id doubles as its ``request_id``: a build
answers no erasure request) claimed, kept and released by
:mod:`eventstore.leased_work`, as erasure rebuilds and re-embedding units are.

:func:`due` finds the streams whose history grew by ``every`` events or more
since their snapshot (or that reached ``every`` events without one): it reads
the clear stream versions of ``streams`` and of the snapshot headers, never a
sealed row.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.leased_work import LeasedQueue
from eventstore.schema import rebuild_jobs, streams
from projections.storage.snapshot_store import HEADER_BUCKET
from projections.storage.tables import projection_snapshots

#: This queue's kind of leased work.
KIND = "snapshot"
#: The kind whose jobs, still open on a stream, hold its builds back: an erasure's
#: proof moves the snapshot itself (eventstore.jobs.KIND).
ERASURE_KIND = "erasure"
#: Streams whose snapshot versions are read per statement.
_CHUNK = 500

QUEUE = LeasedQueue(
    KIND,
    key=("job_id",),
    order=(rebuild_jobs.c.run_after, rebuild_jobs.c.created_at),
    due="run_after",
)


@dataclass(frozen=True)
class DueBuild:
    stream_id: int
    projection: str
    projection_version: int


def due(
    conn: Connection,
    projections: Sequence[tuple[str, int]],
    every: int,
    now: datetime,
    retry_after: timedelta,
) -> list[DueBuild]:
    """The builds to enqueue: per open stream of ``every`` events or more, each projection
    whose snapshot is missing or ``every`` events behind, unless a build of it is
    pending, or failed less than ``retry_after`` ago."""
    grown = conn.execute(
        sa.select(streams.c.stream_id, streams.c.version).where(
            streams.c.closed_at.is_(None),
            streams.c.key_destroyed_at.is_(None),
            streams.c.version >= every,
        )
    ).all()
    if not grown:
        return []
    covered = _snapshot_versions(conn, [s.stream_id for s in grown])
    held = _held_back(conn, now - retry_after)
    return [
        DueBuild(stream.stream_id, name, version)
        for stream in grown
        for name, version in projections
        if (stream.stream_id, name) not in held
        and stream.version - covered.get((stream.stream_id, name), 0) >= every
    ]


def _snapshot_versions(conn: Connection, stream_ids: list[int]) -> dict[tuple[int, str], int]:
    table = projection_snapshots
    found: dict[tuple[int, str], int] = {}
    for start in range(0, len(stream_ids), _CHUNK):
        rows = conn.execute(
            sa.select(table.c.stream_id, table.c.projection, table.c.stream_version).where(
                table.c.stream_id.in_(stream_ids[start : start + _CHUNK]),
                table.c.bucket == HEADER_BUCKET,
            )
        )
        found |= {(r.stream_id, r.projection): r.stream_version or 0 for r in rows}
    return found


def _held_back(conn: Connection, failed_since: datetime) -> set[tuple[int, str]]:
    """(stream, projection) of builds queued or running, or failed since ``failed_since``."""
    c = rebuild_jobs.c
    rows = conn.execute(
        sa.select(c.stream_id, c.projection)
        .where(
            c.kind == KIND,
            sa.or_(
                c.status.in_(("queued", "running")),
                sa.and_(c.status == "failed", c.finished_at >= failed_since),
            ),
        )
        .distinct()
    )
    return {(r.stream_id, r.projection) for r in rows}


def enqueue(
    conn: Connection, builds: Sequence[DueBuild], now: datetime, max_attempts: int
) -> list[uuid.UUID]:
    job_ids = [uuid.uuid4() for _ in builds]
    if builds:
        conn.execute(
            rebuild_jobs.insert(),
            [
                {
                    "job_id": job_id,
                    "kind": KIND,
                    "request_id": job_id,
                    "projection": build.projection,
                    "projection_version": build.projection_version,
                    "stream_id": build.stream_id,
                    "status": "queued",
                    "attempts": 0,
                    "max_attempts": max_attempts,
                    "run_after": now,
                    "created_at": now,
                }
                for job_id, build in zip(job_ids, builds, strict=True)
            ],
        )
    return job_ids


def erasure_open(conn: Connection, stream_id: int) -> bool:
    """Whether an erasure rebuild of the stream is still queued or running."""
    c = rebuild_jobs.c
    query = sa.select(c.job_id).where(
        c.kind == ERASURE_KIND, c.stream_id == stream_id, c.status.in_(("queued", "running"))
    )
    return conn.execute(query.limit(1)).first() is not None


def pending(conn: Connection, stream_id: int | None = None) -> int:
    """Builds queued or running (of one stream, if given)."""
    c = rebuild_jobs.c
    query = sa.select(sa.func.count()).where(c.kind == KIND, c.status.in_(("queued", "running")))
    if stream_id is not None:
        query = query.where(c.stream_id == stream_id)
    return int(conn.execute(query).scalar_one())


def claim(conn: Connection, worker: str, now: datetime, lease: timedelta) -> sa.Row[Any] | None:
    row: sa.Row[Any] | None = QUEUE.claim(conn, worker, now, lease)
    return row


def heartbeat(
    conn: Connection, job_id: uuid.UUID, worker: str, now: datetime, lease: timedelta
) -> bool:
    return QUEUE.heartbeat(conn, (job_id,), worker, now, lease)


def finish(conn: Connection, job_id: uuid.UUID, worker: str, now: datetime, **values: Any) -> bool:
    return QUEUE.finish(conn, (job_id,), worker, now, **values)


def release(
    conn: Connection,
    job: sa.Row[Any],
    worker: str,
    error: str,
    run_after: datetime,
    now: datetime,
    *,
    counts: bool = True,
) -> bool:
    """Give a build back, queued again after ``run_after``: after a failed attempt (failed
    for good once it has used its attempts), or, ``counts=False``, one that could not
    run yet (its claim is no attempt)."""
    failed = counts and job.attempts >= job.max_attempts
    uncounted = {} if counts else {"attempts": job.attempts - 1}
    return QUEUE.release(
        conn,
        (job.job_id,),
        worker,
        error,
        failed=failed,
        run_after=run_after,
        finished_at=now if failed else None,
        **uncounted,
    )
