"""memory projections

Revision ID: pj0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0001"
down_revision = None
branch_labels = ("projections",)
depends_on = "es0001"


def upgrade() -> None:

    op.create_table(
        "memory_edges",
        sa.Column("edge_id", sa.Uuid(), nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("source_node", sa.Uuid(), nullable=False),
        sa.Column("target_node", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("resolved_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("edge_id", name=op.f("pk_memory_edges")),
    )
    with op.batch_alter_table("memory_edges", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_memory_edges_source_node"), ["source_node"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_memory_edges_stream_id"), ["stream_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_memory_edges_target_node"), ["target_node"], unique=False
        )

    op.create_table(
        "memory_events",
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", "event_id", name=op.f("pk_memory_events")),
        sqlite_with_rowid=False,
    )

    op.create_table(
        "memory_nodes",
        sa.Column("node_id", sa.Uuid(), nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("node_type", sa.String(length=32), nullable=False),
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("source_type", sa.String(length=32), nullable=False),
        sa.Column("lifecycle", sa.String(length=32), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("meta", sa.LargeBinary(), nullable=False),
        sa.Column("session_id", sa.LargeBinary(), nullable=True),
        sa.Column("confidence_base", sa.Float(), nullable=False),
        sa.Column("salience_base", sa.Float(), nullable=False),
        sa.Column("reinforcement_boost", sa.Float(), nullable=False),
        sa.Column("reinforcement_count", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("last_reinforced_at", sa.DateTime(), nullable=True),
        sa.Column("superseded_by", sa.Uuid(), nullable=True),
        sa.PrimaryKeyConstraint("stream_id", "event_id", "ordinal", name=op.f("pk_memory_nodes")),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("memory_nodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_memory_nodes_node_id"), ["node_id"], unique=True)

    op.create_table(
        "memory_operations",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("operation_key", sa.String(length=100), nullable=False),
        sa.Column("fingerprint", sa.LargeBinary(length=32), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", "operation_key", name=op.f("pk_memory_operations")),
    )
    op.create_table(
        "memory_vectors",
        sa.Column("node_id", sa.Uuid(), nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("embedder", sa.String(length=100), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", "node_id", name=op.f("pk_memory_vectors")),
    )

    op.create_table(
        "projection_checkpoints",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("commit_group", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", "partition", name=op.f("pk_projection_checkpoints")),
    )
    op.create_table(
        "retrieval_attractors",
        sa.Column("attractor_id", sa.Uuid(), nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("severity", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("attractor_id", name=op.f("pk_retrieval_attractors")),
    )
    with op.batch_alter_table("retrieval_attractors", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_retrieval_attractors_stream_id"), ["stream_id"], unique=False
        )

    op.create_table(
        "retrieval_triggers",
        sa.Column("trigger_id", sa.Uuid(), nullable=False),
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("trigger_id", name=op.f("pk_retrieval_triggers")),
    )
    with op.batch_alter_table("retrieval_triggers", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_retrieval_triggers_stream_id"), ["stream_id"], unique=False
        )


def downgrade() -> None:

    with op.batch_alter_table("retrieval_triggers", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_retrieval_triggers_stream_id"))

    op.drop_table("retrieval_triggers")
    with op.batch_alter_table("retrieval_attractors", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_retrieval_attractors_stream_id"))

    op.drop_table("retrieval_attractors")
    op.drop_table("projection_checkpoints")
    op.drop_table("memory_vectors")
    op.drop_table("memory_operations")
    with op.batch_alter_table("memory_nodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_nodes_node_id"))

    op.drop_table("memory_nodes")
    op.drop_table("memory_events")
    with op.batch_alter_table("memory_edges", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_edges_target_node"))
        batch_op.drop_index(batch_op.f("ix_memory_edges_stream_id"))
        batch_op.drop_index(batch_op.f("ix_memory_edges_source_node"))

    op.drop_table("memory_edges")
