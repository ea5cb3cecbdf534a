"""store_identity: the store's id, which names its keyring file

The row itself is written on first open (eventstore.identity), not here, so
that databases cloned from one migrated template still get ids of their own.
"""

from __future__ import annotations

import sqlalchemy as sa

from eventstore.migrations.ops import column, create_table, drop_table

revision = "es0004"
down_revision = "es0003"


def upgrade() -> None:
    create_table(
        "store_identity",
        column("name", sa.String(length=32)),
        column("value", sa.String(length=64)),
        key=["name"],
    )


def downgrade() -> None:
    drop_table("store_identity")
