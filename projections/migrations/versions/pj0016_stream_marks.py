"""projection_stream_marks: how far an asynchronous projection has applied each stream

A consistent read catches up its own stream, by stream id, instead of a page of
the log partition the stream falls in (on Citus such a page reads every shard).
Each stream's row starts where the partition's checkpoint already covers it: the
stream's last event at or before that checkpoint, so nothing applied is applied
again.  The partitions are the checkpoint rows the projection has.
"""

from __future__ import annotations

from collections import Counter

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import StreamId, column, create_table, drop_table

revision = "pj0016"
down_revision = "pj0015"

# Each stream of one checkpoint's partition, marked at its last event the checkpoint
# covers.  One statement per checkpoint row, its values bound: on Citus a join of the
# distributed events with the coordinator's checkpoint table is refused ("direct joins
# between distributed and local tables"), while this reads events alone, joined with
# themselves on the distribution column.
_COVERED = sa.text(
    """
INSERT INTO projection_stream_marks (stream_id, name, version, commit_group, position)
SELECT e.stream_id, :name, e.version, e.commit_group, e.position
  FROM events e
  JOIN (SELECT stream_id, max(version) AS version
          FROM events
         WHERE stream_id % :parts = :part
           AND (commit_group < :commit_group
                OR (commit_group = :commit_group AND position <= :position))
         GROUP BY stream_id) AS covered
    ON e.stream_id = covered.stream_id AND e.version = covered.version
"""
)
_CHECKPOINTS = sa.text("SELECT name, partition, commit_group, position FROM projection_checkpoints")


def _mark_covered() -> None:
    conn = op.get_bind()
    checkpoints = conn.execute(_CHECKPOINTS).all()
    parts = Counter(name for name, *_ in checkpoints)
    for name, part, commit_group, position in checkpoints:
        conn.execute(
            _COVERED,
            {
                "name": name,
                "parts": parts[name],
                "part": part,
                "commit_group": commit_group,
                "position": position,
            },
        )


def upgrade() -> None:
    create_table(
        "projection_stream_marks",
        column("stream_id", StreamId),
        column("name", sa.String(length=64)),
        column("version", sa.BigInteger()),
        column("commit_group", sa.BigInteger()),
        column("position", sa.BigInteger()),
        key=["stream_id", "name"],
        sqlite_with_rowid=False,
    )
    _mark_covered()


def downgrade() -> None:
    drop_table("projection_stream_marks")
