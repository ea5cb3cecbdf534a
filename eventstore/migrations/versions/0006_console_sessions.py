"""console sign-in sessions"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import Digest, column, create_table, drop_table

revision = "es0006"
down_revision = "es0005"


def upgrade() -> None:
    create_table(
        "console_sessions",
        column("session_hash", Digest),
        column("key_id", sa.String(length=32)),
        column("principal", sa.String(length=16)),
        column("sealed_user_id", sa.LargeBinary(), null=True),
        column("created_at", sa.DateTime()),
        column("last_seen_at", sa.DateTime()),
        sa.ForeignKeyConstraint(
            ["key_id"],
            ["api_keys.key_id"],
            name=op.f("fk_console_sessions_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        key=["session_hash"],
        indexes=[["key_id"]],
    )


def downgrade() -> None:
    drop_table("console_sessions", indexes=[["key_id"]])
