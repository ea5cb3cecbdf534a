"""memory_node_refs and memory_graph_backfills: what erasing one event must re-derive

memory_node_refs records which nodes each non-storing event touched, so that
delete_event re-derives only what depended on the erased event (an index of
memory_operations by event lets it drop those events' idempotency keys).  Streams
written before this migration have no such rows, and items written before
pj0006 have no rows in memory_items; SQL cannot derive either (they come from
encrypted events), so every stream with nodes is marked in
memory_graph_backfills, and its node graph is rebuilt from the log once: on
its first item operation or its next delete_event.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0008"
down_revision = "pj0007"


def upgrade() -> None:
    op.create_table(
        "memory_node_refs",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("node_id", sa.Uuid(), nullable=False),
        sa.PrimaryKeyConstraint(
            "stream_id", "event_id", "node_id", name=op.f("pk_memory_node_refs")
        ),
        sqlite_with_rowid=False,
    )
    op.create_index(
        "ix_memory_node_refs_stream_id_node_id", "memory_node_refs", ["stream_id", "node_id"]
    )
    op.create_index(
        "ix_memory_operations_stream_id_event_id", "memory_operations", ["stream_id", "event_id"]
    )
    op.create_table(
        "memory_graph_backfills",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", name=op.f("pk_memory_graph_backfills")),
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO memory_graph_backfills (stream_id) SELECT DISTINCT stream_id FROM memory_nodes"
    )


def downgrade() -> None:
    op.drop_table("memory_graph_backfills")
    op.drop_index("ix_memory_operations_stream_id_event_id", table_name="memory_operations")
    op.drop_index("ix_memory_node_refs_stream_id_node_id", table_name="memory_node_refs")
    op.drop_table("memory_node_refs")
