"""projection_snapshots, projection_erased_parts, projection_proofs: certified deletes whose
proof costs what they change (issue 33).

A rebuild job after ``delete_event`` replays only the part of the stream the
erasure and later writes reached, starting from a snapshot of item digests that
an earlier replay produced; the parts and the snapshots are kept here.  Every
table is keyed by stream first, so it can be co-located with the stream's rows.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0011"
down_revision = "pj0010"


def upgrade() -> None:
    op.create_table(
        "projection_snapshots",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("projection", sa.String(length=64), nullable=False),
        sa.Column("bucket", sa.Integer(), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint(
            "stream_id", "projection", "bucket", name=op.f("pk_projection_snapshots")
        ),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "projection_erased_parts",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("whole", sa.Boolean(), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=True),
        sa.PrimaryKeyConstraint("stream_id", "seq", name=op.f("pk_projection_erased_parts")),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "projection_proofs",
        sa.Column("stream_id", sa.BigInteger(), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("proof", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("stream_id", "job_id", name=op.f("pk_projection_proofs")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("projection_proofs")
    op.drop_table("projection_erased_parts")
    op.drop_table("projection_snapshots")
