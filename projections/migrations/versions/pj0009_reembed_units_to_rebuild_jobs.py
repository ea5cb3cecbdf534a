"""re-embedding units move to the one table of leased work (rebuild_jobs, kind reembed)

Each unit of ``vector_rebuild_subjects`` becomes a ``rebuild_jobs`` row with its
lease state, attempts and progress; its job's id goes to ``request_id`` and its
run time to the job's creation.  Then the table goes.
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import StreamId, column, create_table

revision = "pj0009"
down_revision = "pj0008"
# The log's branch adds ``rebuild_jobs.kind`` first.
depends_on = "es0009"

#: The vector projection (projections.vectors.VectorProjection), as the units record it.
_PROJECTION, _VERSION = "vector_state", 1
#: workers.reembed.MAX_ATTEMPTS when the units moved.
_MAX_ATTEMPTS = 5
_LEASE = ("status", "attempts", "lease_owner", "lease_expires_at", "finished_at", "last_error")

_units = sa.table(
    "vector_rebuild_subjects",
    *(sa.column(name) for name in ("stream_id", "nodes_embedded", *_LEASE)),
    sa.column("rebuild_id", sa.Uuid()),
)
_jobs = sa.table(
    "rebuild_jobs",
    *(sa.column(name) for name in ("kind", "projection", "projection_version", "stream_id")),
    *(sa.column(name) for name in ("max_attempts", "run_after", "nodes_embedded", "created_at")),
    *(sa.column(name) for name in _LEASE),
    sa.column("job_id", sa.Uuid()),
    sa.column("request_id", sa.Uuid()),
)
_rebuilds = sa.table("vector_rebuilds", sa.column("rebuild_id", sa.Uuid()), sa.column("created_at"))


def upgrade() -> None:
    conn = op.get_bind()
    query = sa.select(_units, _rebuilds.c.created_at).join(
        _rebuilds, _rebuilds.c.rebuild_id == _units.c.rebuild_id
    )
    rows = [
        {
            **{name: row._mapping[name] for name in ("stream_id", "nodes_embedded", *_LEASE)},
            "job_id": uuid.uuid4(),
            "kind": "reembed",
            "request_id": row.rebuild_id,
            "projection": _PROJECTION,
            "projection_version": _VERSION,
            "max_attempts": _MAX_ATTEMPTS,
            "run_after": row.created_at,
            "created_at": row.created_at,
        }
        for row in conn.execute(query)
    ]
    if rows:
        conn.execute(_jobs.insert(), rows)
    op.drop_index(op.f("ix_vector_rebuild_subjects_status_rebuild_id"), "vector_rebuild_subjects")
    op.drop_table("vector_rebuild_subjects")


def downgrade() -> None:
    create_table(
        "vector_rebuild_subjects",
        column("rebuild_id", sa.Uuid()),
        column("stream_id", StreamId),
        column("status", sa.String(length=16)),
        column("attempts", sa.Integer()),
        column("nodes_embedded", sa.BigInteger()),
        column("lease_owner", sa.String(length=100), null=True),
        column("lease_expires_at", sa.DateTime(), null=True),
        column("finished_at", sa.DateTime(), null=True),
        column("last_error", sa.String(length=500), null=True),
        key=["rebuild_id", "stream_id"],
        indexes=[["status", "rebuild_id"]],
    )
    conn = op.get_bind()
    moved = sa.select(_jobs).where(_jobs.c.kind == "reembed")
    rows = [
        {
            **{name: row._mapping[name] for name in ("stream_id", *_LEASE)},
            "rebuild_id": row.request_id,
            "nodes_embedded": row.nodes_embedded or 0,
        }
        for row in conn.execute(moved)
    ]
    if rows:
        conn.execute(_units.insert(), rows)
    conn.execute(_jobs.delete().where(_jobs.c.kind == "reembed"))
