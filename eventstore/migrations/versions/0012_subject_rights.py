"""Restriction of processing (GDPR Art. 18): the current state of each restricted subject

The record is the restriction events in the subject's own stream; ``subject_restrictions``
holds their current state for the automated paths to ask.  ``erasure_requests`` records
whether a forgotten subject was restricted (their certificate says so).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import Digest, column, create_table, drop_table

revision = "es0012"
down_revision = "es0011"


def upgrade() -> None:
    op.add_column("erasure_requests", sa.Column("subject_restricted", sa.Boolean(), nullable=True))
    create_table(
        "subject_restrictions",
        column("namespace", sa.String(length=64)),
        column("subject_key", Digest),
        column("ground", sa.String(length=32)),
        column("reference", sa.String(length=64)),
        column("restricted_at", sa.DateTime()),
        key=["namespace", "subject_key"],
    )


def downgrade() -> None:
    drop_table("subject_restrictions")
    with op.batch_alter_table("erasure_requests") as batch:
        batch.drop_column("subject_restricted")
