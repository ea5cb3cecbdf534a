"""node directory instead of the node-id index of memory_nodes

Nodes named by id alone are found through memory_node_directory, which
erasure does not purge; memory_nodes loses its unique node_id index, whose
entries forget deleted one random page at a time (problem E4 in
docs/benchmarks.md).  Existing nodes get their directory entries here.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import column, create_table, drop_table

revision = "pj0002"
down_revision = "pj0001"


def upgrade() -> None:
    create_table(
        "memory_node_directory",
        column("node_id", sa.Uuid()),
        column("event_id", sa.Uuid()),
        column("ordinal", sa.Integer()),
        key=["node_id"],
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO memory_node_directory (node_id, event_id, ordinal) "
        "SELECT node_id, event_id, ordinal FROM memory_nodes"
    )
    with op.batch_alter_table("memory_nodes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_memory_nodes_node_id"))


def downgrade() -> None:
    with op.batch_alter_table("memory_nodes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_memory_nodes_node_id"), ["node_id"], unique=True)
    drop_table("memory_node_directory")
