"""erasure_requests: the time spans of the erased memories (issue 30)

When the log recorded the erased memories and when they took effect, as the
certificate states them (``erasure.recorded_between`` / ``occurred_between``).
Requests made before this migration have none.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "es0010"
down_revision = "es0009"

COLUMNS = ("recorded_from", "recorded_to", "occurred_from", "occurred_to")


def upgrade() -> None:
    with op.batch_alter_table("erasure_requests", schema=None) as batch_op:
        for name in COLUMNS:
            batch_op.add_column(sa.Column(name, sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("erasure_requests", schema=None) as batch_op:
        for name in reversed(COLUMNS):
            batch_op.drop_column(name)
