"""memory projections"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import Digest, StreamId, column, create_table, drop_table

revision = "pj0001"
down_revision = None
branch_labels = ("projections",)
depends_on = "es0001"

_EDGE_INDEXES = [["source_node"], ["stream_id"], ["target_node"]]


def upgrade() -> None:
    create_table(
        "memory_edges",
        column("edge_id", sa.Uuid()),
        column("stream_id", StreamId),
        column("kind", sa.String(length=32)),
        column("source_node", sa.Uuid()),
        column("target_node", sa.Uuid()),
        column("event_id", sa.Uuid()),
        column("created_at", sa.DateTime()),
        column("resolved_at", sa.DateTime(), null=True),
        key=["edge_id"],
        indexes=_EDGE_INDEXES,
    )

    create_table(
        "memory_events",
        column("event_id", sa.Uuid()),
        column("stream_id", StreamId),
        column("scope", sa.String(length=32)),
        column("recorded_at", sa.DateTime()),
        key=["stream_id", "event_id"],
        sqlite_with_rowid=False,
    )

    create_table(
        "memory_nodes",
        column("node_id", sa.Uuid()),
        column("stream_id", StreamId),
        column("event_id", sa.Uuid()),
        column("ordinal", sa.Integer()),
        column("node_type", sa.String(length=32)),
        column("scope", sa.String(length=32)),
        column("source_type", sa.String(length=32)),
        column("lifecycle", sa.String(length=32)),
        column("content", sa.LargeBinary()),
        column("meta", sa.LargeBinary()),
        column("session_id", sa.LargeBinary(), null=True),
        column("confidence_base", sa.Float()),
        column("salience_base", sa.Float()),
        column("reinforcement_boost", sa.Float()),
        column("reinforcement_count", sa.Integer()),
        column("created_at", sa.DateTime()),
        column("updated_at", sa.DateTime()),
        column("last_reinforced_at", sa.DateTime(), null=True),
        column("superseded_by", sa.Uuid(), null=True),
        key=["stream_id", "event_id", "ordinal"],
        sqlite_with_rowid=False,
    )
    op.create_index(op.f("ix_memory_nodes_node_id"), "memory_nodes", ["node_id"], unique=True)

    create_table(
        "memory_operations",
        column("stream_id", StreamId),
        column("operation_key", sa.String(length=100)),
        column("fingerprint", Digest),
        column("event_id", sa.Uuid()),
        key=["stream_id", "operation_key"],
    )
    create_table(
        "memory_vectors",
        column("node_id", sa.Uuid()),
        column("stream_id", StreamId),
        column("event_id", sa.Uuid()),
        column("embedder", sa.String(length=100)),
        column("embedding", sa.LargeBinary()),
        key=["stream_id", "node_id"],
    )

    create_table(
        "projection_checkpoints",
        column("name", sa.String(length=64)),
        column("partition", sa.Integer()),
        column("commit_group", sa.BigInteger()),
        column("position", sa.BigInteger()),
        column("updated_at", sa.DateTime()),
        key=["name", "partition"],
    )
    create_table(
        "retrieval_attractors",
        column("attractor_id", sa.Uuid()),
        column("stream_id", StreamId),
        column("event_id", sa.Uuid()),
        column("body", sa.LargeBinary()),
        column("severity", sa.Float()),
        key=["attractor_id"],
        indexes=[["stream_id"]],
    )

    create_table(
        "retrieval_triggers",
        column("trigger_id", sa.Uuid()),
        column("stream_id", StreamId),
        column("event_id", sa.Uuid()),
        column("body", sa.LargeBinary()),
        column("weight", sa.Float()),
        column("threshold", sa.Float()),
        key=["trigger_id"],
        indexes=[["stream_id"]],
    )


def downgrade() -> None:
    drop_table("retrieval_triggers", indexes=[["stream_id"]])
    drop_table("retrieval_attractors", indexes=[["stream_id"]])
    drop_table("projection_checkpoints")
    drop_table("memory_vectors")
    drop_table("memory_operations")
    op.drop_index(op.f("ix_memory_nodes_node_id"), table_name="memory_nodes")
    drop_table("memory_nodes")
    drop_table("memory_events")
    drop_table("memory_edges", indexes=_EDGE_INDEXES)
