"""API keys may carry an expiry

A key whose ``expires_at`` has passed no longer authenticates; existing keys
get none and keep working as before.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "es0005"
down_revision = "es0004"


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("expires_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("expires_at")
