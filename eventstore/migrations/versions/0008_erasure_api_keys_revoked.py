"""Erasure requests record how many API keys a forget revoked

A forget revokes the subject's user keys in its transaction; the count goes
into the certificate.  Earlier requests revoked none and keep a null.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "es0008"
down_revision = "es0007"


def upgrade() -> None:
    op.add_column("erasure_requests", sa.Column("api_keys_revoked", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("erasure_requests") as batch:
        batch.drop_column("api_keys_revoked")
