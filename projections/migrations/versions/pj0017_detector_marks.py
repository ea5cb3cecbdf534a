"""projection_stream_marks: the likely-update detector's marks, where its checkpoints stand

The detector now keeps a mark per stream too (what it has judged, under its own
name), so that a consistent read judges its own stream instead of reading a page
of the detector's log partition.  pj0016 marked the streams of every follower's
checkpoints as they stood then, and nothing moved the detector's marks since:
they are dropped and marked again at each stream's last event the detector's
checkpoints cover now, so nothing judged is judged again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from projections.migrations.versions.pj0016_stream_marks import _COVERED

revision = "pj0017"
down_revision = "pj0016"

NAME = "likely_updates"

_DROP = sa.text("DELETE FROM projection_stream_marks WHERE name = :name")
_CHECKPOINTS = sa.text(
    "SELECT partition, commit_group, position FROM projection_checkpoints WHERE name = :name"
)


def upgrade() -> None:
    conn = op.get_bind()
    conn.execute(_DROP, {"name": NAME})
    checkpoints = conn.execute(_CHECKPOINTS, {"name": NAME}).all()
    for part, commit_group, position in checkpoints:
        values = {"commit_group": commit_group, "position": position}
        conn.execute(_COVERED, {"name": NAME, "parts": len(checkpoints), "part": part} | values)


def downgrade() -> None:
    # The code before keeps no marks of the detector and reads none: they can stay.
    pass
