"""the embedder as a property of the store; vectors per embedder; re-embedding jobs

memory_vectors gains its embedder in the key (a node may have the old and the
new embedder's vector during a re-embedding) and the vector's dimension.
vector_embedders records the store's embedder.  Every store made before this
revision embedded with the hashing embedder: the revision records the
embedder its vectors name (``hashing-v1-256`` unless a program chose another)
so that such a store keeps working, unchanged, until an operator re-embeds it.
A store with no nodes yet records nothing; its first process records the
configured default.

Revision ID: pj0003
Revises: pj0002
Create Date: 2026-12-02
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from eventstore.schema import UTCDateTime

revision = "pj0003"
down_revision = "pj0002"
branch_labels = None
depends_on = None

_HASHING = re.compile(r"hashing-v1-(\d+)")


def upgrade() -> None:
    with op.batch_alter_table("memory_vectors", schema=None) as batch_op:
        batch_op.add_column(sa.Column("dimension", sa.Integer(), nullable=True))
    # A sealed vector is a 12-byte nonce, float32 values and a 16-byte GCM tag.
    op.execute("UPDATE memory_vectors SET dimension = (length(embedding) - 28) / 4")
    with op.batch_alter_table("memory_vectors", schema=None) as batch_op:
        batch_op.alter_column("dimension", existing_type=sa.Integer(), nullable=False)
        batch_op.drop_constraint("pk_memory_vectors", type_="primary")
        batch_op.create_primary_key("pk_memory_vectors", ["stream_id", "node_id", "embedder"])
    _create_tables()
    _record_existing_embedder()


def _create_tables() -> None:
    op.create_table(
        "vector_embedders",
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("spec", sa.String(length=300), nullable=True),
        sa.Column("dimension", sa.Integer(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("role", name=op.f("pk_vector_embedders")),
    )
    op.create_table(
        "subject_embedders",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("embedder", sa.String(length=100), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", name=op.f("pk_subject_embedders")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "vector_rebuilds",
        sa.Column("rebuild_id", sa.Uuid(), nullable=False),
        sa.Column("embedder", sa.String(length=100), nullable=False),
        sa.Column("spec", sa.String(length=300), nullable=True),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("subjects_total", sa.Integer(), nullable=False),
        sa.Column("nodes_total", sa.BigInteger(), nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.PrimaryKeyConstraint("rebuild_id", name=op.f("pk_vector_rebuilds")),
    )
    op.create_table(
        "vector_rebuild_subjects",
        sa.Column("rebuild_id", sa.Uuid(), nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("nodes_embedded", sa.BigInteger(), nullable=False),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.PrimaryKeyConstraint("rebuild_id", "stream_id", name=op.f("pk_vector_rebuild_subjects")),
    )
    op.create_index(
        op.f("ix_vector_rebuild_subjects_status_rebuild_id"),
        "vector_rebuild_subjects",
        ["status", "rebuild_id"],
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
    op.drop_index(
        op.f("ix_vector_rebuild_subjects_status_rebuild_id"), table_name="vector_rebuild_subjects"
    )
    op.drop_table("vector_rebuild_subjects")
    op.drop_table("vector_rebuilds")
    op.drop_table("subject_embedders")
    op.drop_table("vector_embedders")
    op.execute(
        "DELETE FROM memory_vectors"
        " WHERE embedder NOT IN (SELECT min(embedder) FROM memory_vectors)"
    )
    with op.batch_alter_table("memory_vectors", schema=None) as batch_op:
        batch_op.drop_constraint("pk_memory_vectors", type_="primary")
        batch_op.create_primary_key("pk_memory_vectors", ["stream_id", "node_id"])
        batch_op.drop_column("dimension")
