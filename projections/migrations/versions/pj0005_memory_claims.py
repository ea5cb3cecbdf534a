"""memory_claims: structured claims of ingested messages

Revision ID: pj0005
Revises: pj0002
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0005"
down_revision = "pj0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_claims",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("node_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("plan_event_id", sa.Uuid(), nullable=False),
        sa.Column("match_key", sa.LargeBinary(length=32), nullable=False),
        sa.Column("valid_from", sa.DateTime(), nullable=False),
        sa.Column("valid_to", sa.DateTime(), nullable=True),
        sa.Column("correction", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", "node_id", name=op.f("pk_memory_claims")),
        sqlite_with_rowid=False,
    )
    op.create_index(
        "ix_memory_claims_stream_id_match_key", "memory_claims", ["stream_id", "match_key"]
    )


def downgrade() -> None:
    op.drop_index("ix_memory_claims_stream_id_match_key", table_name="memory_claims")
    op.drop_table("memory_claims")
