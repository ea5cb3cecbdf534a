"""retrieval_images: a cold start that reads less (issue 33).

A sealed image of a subject's built retrieval index, in chunks, keyed by stream
first (distributed with the stream's rows on Citus).  Nothing to backfill: the
next full load of a large subject writes its image.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0014"
down_revision = "pj0013"


def upgrade() -> None:
    op.create_table(
        "retrieval_images",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("chunk", sa.Integer(), nullable=False),
        sa.Column("stream_version", sa.BigInteger(), nullable=False),
        sa.Column("chunks", sa.Integer(), nullable=False),
        sa.Column("image_id", sa.Uuid(), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", "chunk", name=op.f("pk_retrieval_images")),
    )


def downgrade() -> None:
    op.drop_table("retrieval_images")
