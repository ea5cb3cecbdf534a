"""the embedder as a property of the store; vectors per embedder; re-embedding jobs

memory_vectors gains its embedder in the key (a node may have the old and the
new embedder's vector during a re-embedding) and the vector's dimension.
vector_embedders records the store's embedder.  Every store made before this
revision embedded with the hashing embedder: the revision records the
embedder its vectors name (``hashing-v1-256`` unless a program chose another)
so that such a store keeps working, unchanged, until an operator re-embeds it.
A store with no nodes yet records nothing; its first process records the
configured default.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import StreamId, column, create_table, drop_table
from eventstore.schema import UTCDateTime

revision = "pj0003"
down_revision = "pj0002"

_HASHING = re.compile(r"hashing-v1-(\d+)")


def upgrade() -> None:
    with op.batch_alter_table("memory_vectors", schema=None) as batch_op:
        batch_op.add_column(column("dimension", sa.Integer(), null=True))
    # A sealed vector is a 12-byte nonce, float32 values and a 16-byte GCM tag.
    op.execute("UPDATE memory_vectors SET dimension = (length(embedding) - 28) / 4")
    with op.batch_alter_table("memory_vectors", schema=None) as batch_op:
        batch_op.alter_column("dimension", existing_type=sa.Integer(), nullable=False)
        batch_op.drop_constraint("pk_memory_vectors", type_="primary")
        batch_op.create_primary_key("pk_memory_vectors", ["stream_id", "node_id", "embedder"])
    _create_tables()
    _record_existing_embedder()


def _create_tables() -> None:
    create_table(
        "vector_embedders",
        column("role", sa.String(length=16)),
        column("name", sa.String(length=100)),
        column("spec", sa.String(length=300), null=True),
        column("dimension", sa.Integer()),
        column("recorded_at", sa.DateTime()),
        key=["role"],
    )
    create_table(
        "subject_embedders",
        column("stream_id", StreamId),
        column("embedder", sa.String(length=100)),
        key=["stream_id"],
        sqlite_with_rowid=False,
    )
    create_table(
        "vector_rebuilds",
        column("rebuild_id", sa.Uuid()),
        column("embedder", sa.String(length=100)),
        column("spec", sa.String(length=300), null=True),
        column("scope", sa.String(length=16)),
        column("status", sa.String(length=16)),
        column("subjects_total", sa.Integer()),
        column("nodes_total", sa.BigInteger()),
        column("requested_by", sa.String(length=200), null=True),
        column("created_at", sa.DateTime()),
        column("finished_at", sa.DateTime(), null=True),
        column("last_error", sa.String(length=500), null=True),
        key=["rebuild_id"],
    )
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


def _record_existing_embedder() -> None:
    """An existing store keeps the embedder its vectors were made with."""
    conn = op.get_bind()
    has_nodes = conn.execute(sa.text("SELECT 1 FROM memory_nodes LIMIT 1")).first()
    used = conn.execute(
        sa.text(
            "SELECT embedder, dimension, count(*) AS n FROM memory_vectors "
            "GROUP BY embedder, dimension ORDER BY n DESC LIMIT 1"
        )
    ).first()
    if used is None and has_nodes is None:
        return  # a new store: its first process records the configured embedder
    name, dimension = ("hashing-v1-256", 256) if used is None else (used[0], used[1])
    hashing = _HASHING.fullmatch(name)
    spec = f"hashing:{hashing.group(1)}" if hashing else None
    table = sa.table(
        "vector_embedders",
        sa.column("role"),
        sa.column("name"),
        sa.column("spec"),
        sa.column("dimension"),
        sa.column("recorded_at", UTCDateTime()),
    )
    conn.execute(
        table.insert().values(
            role="current",
            name=name,
            spec=spec,
            dimension=dimension,
            recorded_at=datetime.now(UTC),
        )
    )


def downgrade() -> None:
    drop_table("vector_rebuild_subjects", indexes=[["status", "rebuild_id"]])
    drop_table("vector_rebuilds")
    drop_table("subject_embedders")
    drop_table("vector_embedders")
    op.execute(
        "DELETE FROM memory_vectors"
        " WHERE embedder NOT IN (SELECT min(embedder) FROM memory_vectors)"
    )
    with op.batch_alter_table("memory_vectors", schema=None) as batch_op:
        batch_op.drop_constraint("pk_memory_vectors", type_="primary")
        batch_op.create_primary_key("pk_memory_vectors", ["stream_id", "node_id"])
        batch_op.drop_column("dimension")
