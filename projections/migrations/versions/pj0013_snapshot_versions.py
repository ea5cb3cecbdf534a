"""projection_snapshots.stream_version: snapshots built in the background (issue 33).

The header row of a snapshot names the stream version its replay covers, in the
clear, so the periodic pass that enqueues snapshot builds finds the streams whose
history grew past its threshold without opening a sealed header.  Existing
headers keep NULL: such a stream counts as having no snapshot, and its next
build (or certified delete) writes the version.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0013"
down_revision = "pj0012"


def upgrade() -> None:
    with op.batch_alter_table("projection_snapshots", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stream_version", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("projection_snapshots", schema=None) as batch_op:
        batch_op.drop_column("stream_version")
