"""rebuild_jobs becomes the one table of leased work: a kind per row

Every row so far is an erasure rebuild job (kind ``erasure``).  The
re-embedding units move in from the projections' ``vector_rebuild_subjects``
(migration pj0009, kind ``reembed``), with their progress in
``nodes_embedded``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "es0009"
down_revision = "es0008"


def upgrade() -> None:
    with op.batch_alter_table("rebuild_jobs") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(length=16), nullable=False, server_default="erasure")
        )
        batch.add_column(sa.Column("nodes_embedded", sa.BigInteger(), nullable=True))
    # The default only filled the existing rows: each queue names its kind.
    with op.batch_alter_table("rebuild_jobs") as batch:
        batch.alter_column("kind", server_default=None)


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM rebuild_jobs WHERE kind <> 'erasure'"))
    with op.batch_alter_table("rebuild_jobs") as batch:
        batch.drop_column("nodes_embedded")
        batch.drop_column("kind")
