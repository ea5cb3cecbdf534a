"""console sign-in sessions

Revision ID: es0006
Revises: es0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "es0006"
down_revision = "es0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("session_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("principal", sa.String(length=16), nullable=False),
        sa.Column("sealed_user_id", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["key_id"],
            ["api_keys.key_id"],
            name=op.f("fk_console_sessions_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_hash", name=op.f("pk_console_sessions")),
    )
    op.create_index(
        op.f("ix_console_sessions_key_id"), "console_sessions", ["key_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_console_sessions_key_id"), table_name="console_sessions")
    op.drop_table("console_sessions")
