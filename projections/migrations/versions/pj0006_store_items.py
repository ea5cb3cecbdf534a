"""memory_items: keyed items found by a keyed hash (OblivioStore's items)

Revision ID: pj0006
Revises: pj0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0006"
down_revision = "pj0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_items",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("item", sa.LargeBinary(length=32), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("stream_id", "item", "version", name=op.f("pk_memory_items")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_memory_items_stream_id_event_id", "memory_items", ["stream_id", "event_id"])


def downgrade() -> None:
    op.drop_index("ix_memory_items_stream_id_event_id", table_name="memory_items")
    op.drop_table("memory_items")
