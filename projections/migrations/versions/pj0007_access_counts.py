"""access counts of retrieval; archived nodes (Semvec mechanism 1)

memory_node_access counts how often retrieval returned each node
(operational statistics, outside every digest); memory_nodes.archived_at
marks nodes a memory.archived event took out of default retrieval.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0007"
down_revision = "pj0006"


def upgrade() -> None:
    op.create_table(
        "memory_node_access",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("node_id", sa.Uuid(), nullable=False),
        sa.Column("accesses", sa.BigInteger(), nullable=False),
        sa.Column("last_accessed_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint(
            "stream_id", "event_id", "node_id", name=op.f("pk_memory_node_access")
        ),
        sqlite_with_rowid=False,
    )
    with op.batch_alter_table("memory_nodes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("archived_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memory_nodes", schema=None) as batch_op:
        batch_op.drop_column("archived_at")
    op.drop_table("memory_node_access")
