"""store_identity: the store's id, which names its keyring file

Revision ID: es0004
Revises: es0003
Create Date: 2026-12-02

The row itself is written on first open (eventstore.identity), not here, so
that databases cloned from one migrated template still get ids of their own.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "es0004"
down_revision = "es0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "store_identity",
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("value", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_store_identity")),
    )


def downgrade() -> None:
    op.drop_table("store_identity")
