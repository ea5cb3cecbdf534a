"""SQL of re-embedding jobs: one row per job, one work unit per subject, claimed with leases.

Units are leased work of kind ``reembed`` in the one table of leased work
(``rebuild_jobs``, the unit's job id in ``request_id``), claimed, kept and
released by :mod:`eventstore.leased_work` as the erasure rebuild jobs are
(:mod:`eventstore.jobs`): the oldest runnable unit of a running job (queued, or
running with an expired lease because its worker died) is marked running for
one worker until its lease expires.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.leased_work import LeasedQueue
from eventstore.schema import rebuild_jobs as units
from projections.storage.embedder_store import RecordedEmbedder
from projections.storage.tables import nodes, vector_rebuilds, vectors

#: This queue's kind of leased work.
KIND = "reembed"
#: What a unit rebuilds: the vector projection (``projections.vectors``), at its version.
PROJECTION, PROJECTION_VERSION = "vector_state", 1

#: One unit per subject of a running job, taken oldest job first, by stream id.
QUEUE = LeasedQueue(
    KIND,
    key=("request_id", "stream_id"),
    order=(vector_rebuilds.c.created_at, units.c.stream_id),
    parent=vector_rebuilds,
    parent_on=vector_rebuilds.c.rebuild_id == units.c.request_id,
    parent_runs=vector_rebuilds.c.status == "running",
)


@dataclass(frozen=True)
class RebuildProgress:
    """What an operator sees of a re-embedding job."""

    rebuild_id: uuid.UUID
    embedder: str
    scope: str
    status: str  # running | done | failed
    subjects_total: int
    subjects_done: int
    nodes_total: int
    nodes_embedded: int
    created_at: datetime
    finished_at: datetime | None
    last_error: str | None


def create(
    conn: Connection,
    target: RecordedEmbedder,
    scope: str,
    stream_ids: Sequence[int],
    requested_by: str | None,
    now: datetime,
    max_attempts: int,
) -> uuid.UUID:
    rebuild_id = uuid.uuid4()
    conn.execute(
        vector_rebuilds.insert().values(
            rebuild_id=rebuild_id,
            embedder=target.name,
            spec=target.spec,
            scope=scope,
            status="running",
            subjects_total=len(stream_ids),
            nodes_total=missing_count(conn, stream_ids, target.name),
            requested_by=requested_by,
            created_at=now,
        )
    )
    if stream_ids:
        conn.execute(
            units.insert(),
            [
                {
                    "job_id": uuid.uuid4(),
                    "kind": KIND,
                    "request_id": rebuild_id,
                    "projection": PROJECTION,
                    "projection_version": PROJECTION_VERSION,
                    "stream_id": stream_id,
                    "status": "queued",
                    "attempts": 0,
                    "max_attempts": max_attempts,
                    "run_after": now,
                    "nodes_embedded": 0,
                    "created_at": now,
                }
                for stream_id in stream_ids
            ],
        )
    return rebuild_id


def embedded_streams(conn: Connection) -> list[int]:
    """Every subject (stream) that has nodes: what ``--all`` re-embeds."""
    return list(conn.execute(sa.select(nodes.c.stream_id).distinct()).scalars())


def _missing(stream_id: Any, embedder: str) -> sa.Select[Any]:
    """Nodes of ``stream_id`` without a vector of ``embedder``."""
    has_target = sa.and_(
        vectors.c.stream_id == nodes.c.stream_id,
        vectors.c.node_id == nodes.c.node_id,
        vectors.c.embedder == embedder,
    )
    return (
        sa.select(nodes.c.node_id, nodes.c.event_id, nodes.c.content)
        .where(nodes.c.stream_id == stream_id)
        .where(~sa.exists().where(has_target))
    )


def missing_count(conn: Connection, stream_ids: Sequence[int], embedder: str) -> int:
    """Nodes the job will embed: those lacking ``embedder``'s vector that have another's
    (the vector projection embeds the rest with the target itself)."""
    total = 0
    for stream_id in stream_ids:
        query = sa.select(sa.func.count()).select_from(
            _missing(stream_id, embedder).where(_applied()).subquery()
        )
        total += int(conn.execute(query).scalar_one())
    return total


def _applied() -> sa.Exists:
    """The node has a vector (of any embedder): the projection has applied its event."""
    return sa.exists().where(
        vectors.c.stream_id == nodes.c.stream_id, vectors.c.node_id == nodes.c.node_id
    )


def missing_nodes(
    conn: Connection,
    stream_id: int,
    embedder: str,
    limit: int,
    after: tuple[uuid.UUID, int] | None = None,
) -> list[sa.Row[Any]]:
    """Up to ``limit`` nodes still to embed, in key order after ``after`` (an
    ``(event_id, ordinal)``), each with whether it has any vector yet.

    A node with no vector at all belongs to an event the vector projection has
    not applied yet; that projection writes the target's vector itself.
    """
    query = _missing(stream_id, embedder).add_columns(nodes.c.ordinal, _applied().label("applied"))
    if after is not None:
        query = query.where(sa.tuple_(nodes.c.event_id, nodes.c.ordinal) > after)
    return list(conn.execute(query.order_by(nodes.c.event_id, nodes.c.ordinal).limit(limit)))


def claim(conn: Connection, worker: str, now: datetime, lease: timedelta) -> sa.Row[Any] | None:
    """Take the next runnable unit of a running job for ``worker`` (see module docstring)."""
    row: sa.Row[Any] | None = QUEUE.claim(conn, worker, now, lease)
    return row


def progress(
    conn: Connection,
    rebuild_id: uuid.UUID,
    stream_id: int,
    worker: str,
    embedded: int,
    now: datetime,
    lease: timedelta,
) -> bool:
    """Count a batch and extend the lease; False if ``worker`` no longer holds the unit."""
    key = (rebuild_id, stream_id)
    nodes_embedded = units.c.nodes_embedded + embedded
    return QUEUE.heartbeat(conn, key, worker, now, lease, nodes_embedded=nodes_embedded)


def finish_unit(
    conn: Connection, rebuild_id: uuid.UUID, stream_id: int, worker: str, now: datetime
) -> bool:
    return QUEUE.finish(conn, (rebuild_id, stream_id), worker, now, lease_owner=None)


def fail_unit(
    conn: Connection, rebuild_id: uuid.UUID, stream_id: int, worker: str, error: str, retry: bool
) -> None:
    QUEUE.release(conn, (rebuild_id, stream_id), worker, error, failed=not retry)


def existing_nodes(
    conn: Connection, stream_id: int, event_ids: Collection[uuid.UUID]
) -> set[uuid.UUID]:
    """The nodes of stream ``stream_id`` that these events still derive (through the
    nodes' key, by event): what a batch embedded that an erasure has not purged since."""
    query = sa.select(nodes.c.node_id).where(
        nodes.c.stream_id == stream_id, nodes.c.event_id.in_(set(event_ids))
    )
    return set(conn.execute(query).scalars())


def open_units(conn: Connection, rebuild_id: uuid.UUID) -> int:
    """Units of the job not done yet (queued, running or failed)."""
    query = sa.select(sa.func.count()).where(
        units.c.request_id == rebuild_id, units.c.kind == KIND, units.c.status != "done"
    )
    return int(conn.execute(query).scalar_one())


def finish(
    conn: Connection, rebuild_id: uuid.UUID, status: str, now: datetime, error: str | None = None
) -> bool:
    """Close a running job; False if it was closed already (by another worker)."""
    result = conn.execute(
        vector_rebuilds.update()
        .where(vector_rebuilds.c.rebuild_id == rebuild_id, vector_rebuilds.c.status == "running")
        .values(status=status, finished_at=now, last_error=None if error is None else error[:500])
    )
    return result.rowcount == 1


def job(conn: Connection, rebuild_id: uuid.UUID) -> sa.Row[Any] | None:
    return conn.execute(
        sa.select(vector_rebuilds).where(vector_rebuilds.c.rebuild_id == rebuild_id)
    ).first()


def running(conn: Connection) -> list[sa.Row[Any]]:
    return list(
        conn.execute(sa.select(vector_rebuilds).where(vector_rebuilds.c.status == "running"))
    )


def recent_progress(conn: Connection, limit: int) -> list[RebuildProgress]:
    """The ``limit`` most recent jobs' progress, newest first (counts only, no content)."""
    rows = conn.execute(
        sa.select(vector_rebuilds)
        .order_by(vector_rebuilds.c.created_at.desc(), vector_rebuilds.c.rebuild_id)
        .limit(limit)
    )
    return [_progress_of(conn, row) for row in rows]


def read_progress(conn: Connection, rebuild_id: uuid.UUID) -> RebuildProgress | None:
    row = job(conn, rebuild_id)
    if row is None:
        return None
    return _progress_of(conn, row)


def _progress_of(conn: Connection, row: sa.Row[Any]) -> RebuildProgress:
    rebuild_id = row.rebuild_id
    counts = conn.execute(
        sa.select(
            sa.func.count().filter(units.c.status == "done"),
            sa.func.coalesce(sa.func.sum(units.c.nodes_embedded), 0),
            sa.func.max(units.c.last_error),
        ).where(units.c.request_id == rebuild_id, units.c.kind == KIND)
    ).one()
    return RebuildProgress(
        rebuild_id=row.rebuild_id,
        embedder=row.embedder,
        scope=row.scope,
        status=row.status,
        subjects_total=row.subjects_total,
        subjects_done=int(counts[0]),
        nodes_total=row.nodes_total,
        nodes_embedded=int(counts[1]),
        created_at=row.created_at,
        finished_at=row.finished_at,
        last_error=row.last_error or counts[2],
    )
