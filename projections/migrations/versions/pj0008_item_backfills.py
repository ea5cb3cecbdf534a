"""memory_item_backfills: streams whose item rows are derived again on first use

Items written before the items index (pj0006) have no rows in memory_items,
and SQL cannot derive them (the item key is inside encrypted events).  Every
stream with nodes is marked here; the first item operation on a marked
stream derives its rows from the log and drops the mark.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0008"
down_revision = "pj0007"


def upgrade() -> None:
    op.create_table(
        "memory_item_backfills",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", name=op.f("pk_memory_item_backfills")),
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO memory_item_backfills (stream_id) SELECT DISTINCT stream_id FROM memory_nodes"
    )


def downgrade() -> None:
    op.drop_table("memory_item_backfills")
