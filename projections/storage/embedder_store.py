"""SQL of the store's embedder record and of which embedder serves each subject.

``vector_embedders`` holds the store's ``current`` embedder and, while a
re-embedding job runs, its ``target``; ``subject_embedders`` the subjects that
job has already switched.  A subject is served by its switched embedder if it
has one, else by the store's current one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from projections.storage import Fetch, execute
from projections.storage.tables import (
    attractors,
    subject_embedders,
    triggers,
    vector_embedders,
    vectors,
)

CURRENT = "current"
TARGET = "target"


@dataclass(frozen=True)
class RecordedEmbedder:
    """An embedder as the store records it: its vectors' name, how to build it, its size."""

    name: str
    spec: str | None  # None: supplied in code, it cannot be rebuilt from a name
    dimension: int


#: Built once: the vector state reads it on every page.
_RECORDED = sa.select(
    vector_embedders.c.role,
    vector_embedders.c.name,
    vector_embedders.c.spec,
    vector_embedders.c.dimension,
)


def recorded(conn: Connection, fetch: Fetch = execute) -> dict[str, RecordedEmbedder]:
    """The store's embedders by role (``current``, ``target``); empty for a new store.
    ``fetch`` runs the statement (the vector state passes the backend's, as it reads
    them on every page)."""
    rows = fetch(conn, _RECORDED, {})
    return {role: RecordedEmbedder(name, spec, dimension) for role, name, spec, dimension in rows}


def record(conn: Connection, role: str, embedder: RecordedEmbedder, now: datetime) -> None:
    """Record (or replace) the embedder of ``role``."""
    conn.execute(vector_embedders.delete().where(vector_embedders.c.role == role))
    conn.execute(
        vector_embedders.insert().values(
            role=role,
            name=embedder.name,
            spec=embedder.spec,
            dimension=embedder.dimension,
            recorded_at=now,
        )
    )


def forget_role(conn: Connection, role: str) -> None:
    conn.execute(vector_embedders.delete().where(vector_embedders.c.role == role))


def current_embedder() -> sa.ScalarSelect[str]:
    """SQL for the store's current embedder (``None`` when it records none)."""
    return (
        sa.select(vector_embedders.c.name)
        .where(vector_embedders.c.role == CURRENT)
        .scalar_subquery()
    )


def serving_column() -> sa.ColumnElement[str]:
    """SQL for the serving embedder of ``subject_embedders``' outer-joined stream."""
    return sa.func.coalesce(subject_embedders.c.embedder, current_embedder())


def switched(conn: Connection, stream_ids: Collection[int]) -> dict[int, str]:
    """The switched subjects among ``stream_ids`` and the embedder that serves each."""
    if not stream_ids:
        return {}
    rows = conn.execute(
        sa.select(subject_embedders).where(subject_embedders.c.stream_id.in_(sorted(stream_ids)))
    )
    return {row.stream_id: row.embedder for row in rows}


def switch_subject(conn: Connection, stream_id: int, embedder: str) -> None:
    """Serve ``stream_id`` from ``embedder``'s vectors and drop its others, at once."""
    conn.execute(subject_embedders.delete().where(subject_embedders.c.stream_id == stream_id))
    conn.execute(subject_embedders.insert().values(stream_id=stream_id, embedder=embedder))
    conn.execute(
        vectors.delete().where(vectors.c.stream_id == stream_id, vectors.c.embedder != embedder)
    )


def unswitched_probe_streams(conn: Connection) -> list[int]:
    """Streams with triggers or attractors that no job switched one by one."""
    with_probes = sa.union(
        sa.select(triggers.c.stream_id), sa.select(attractors.c.stream_id)
    ).subquery()
    query = (
        sa.select(with_probes.c.stream_id)
        .where(with_probes.c.stream_id.not_in(sa.select(subject_embedders.c.stream_id)))
        .order_by(with_probes.c.stream_id)
    )
    return list(conn.execute(query).scalars())


def promote_target(conn: Connection, target: RecordedEmbedder, now: datetime) -> int:
    """The target becomes the store's embedder; every other embedder's vectors go.

    Returns how many old vectors were purged (those of subjects the job did
    not switch one by one, e.g. written by a replay while it ran).
    """
    record(conn, CURRENT, target, now)
    forget_role(conn, TARGET)
    conn.execute(subject_embedders.delete())
    purged = conn.execute(vectors.delete().where(vectors.c.embedder != target.name))
    return int(purged.rowcount or 0)


def serving(conn: Connection, stream_id: int) -> str | None:
    """The embedder whose vectors serve ``stream_id``; ``None`` if the store records none."""
    row = conn.execute(
        sa.select(serving_column())
        .select_from(vector_embedders)
        .outerjoin(subject_embedders, subject_embedders.c.stream_id == stream_id)
        .limit(1)
    ).first()
    if row is None:  # no recorded embedder at all
        return None
    return str(row[0])
