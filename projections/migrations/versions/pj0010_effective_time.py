"""effective time of nodes: memory_nodes.occurred_at and valid_to (issue 30)

A node's effective time (when its statement took effect) and the effective
time a correction ended its validity.  Both derive from encrypted events
(a stored event's ``occurred_at``, a claim's interval), which SQL cannot read:
existing nodes start effective when they were derived (``created_at``), and
every stream with nodes is marked in memory_graph_backfills, so its node graph
is rebuilt from the log once (its first item operation or next delete_event),
as migration pj0008 arranged.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0010"
down_revision = "pj0009"


def upgrade() -> None:
    with op.batch_alter_table("memory_nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("occurred_at", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("valid_to", sa.DateTime(), nullable=True))
    op.execute("UPDATE memory_nodes SET occurred_at = created_at")
    with op.batch_alter_table("memory_nodes", schema=None) as batch_op:
        batch_op.alter_column("occurred_at", existing_type=sa.DateTime(), nullable=False)
    # Joined on the stream id (the distribution column on Citus), not a NOT IN.
    op.execute(
        "INSERT INTO memory_graph_backfills (stream_id) SELECT DISTINCT n.stream_id"
        " FROM memory_nodes n LEFT JOIN memory_graph_backfills b ON b.stream_id = n.stream_id"
        " WHERE b.stream_id IS NULL"
    )


def downgrade() -> None:
    with op.batch_alter_table("memory_nodes", schema=None) as batch_op:
        batch_op.drop_column("valid_to")
        batch_op.drop_column("occurred_at")
