"""projection_stream_marks: how far an asynchronous projection has applied each stream

A consistent read catches up its own stream, by stream id, instead of a page of
the log partition the stream falls in (on Citus such a page reads every shard).
Each stream's row starts where the partition's checkpoint already covers it: the
stream's last event at or before that checkpoint, so nothing applied is applied
again.  The partitions are the checkpoint rows the projection has.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import StreamId, column, create_table, drop_table

revision = "pj0016"
down_revision = "pj0015"

_COVERED = """
INSERT INTO projection_stream_marks (stream_id, name, version, commit_group, position)
SELECT covered.stream_id, covered.name, covered.version, e.commit_group, e.position
  FROM (SELECT e.stream_id, c.name, max(e.version) AS version
          FROM events e
          JOIN projection_checkpoints c
            ON c.partition = e.stream_id % (SELECT count(*) FROM projection_checkpoints n
                                             WHERE n.name = c.name)
         WHERE e.commit_group < c.commit_group
            OR (e.commit_group = c.commit_group AND e.position <= c.position)
         GROUP BY e.stream_id, c.name) AS covered
  JOIN events e ON e.stream_id = covered.stream_id AND e.version = covered.version
"""


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
    op.execute(_COVERED)


def downgrade() -> None:
    drop_table("projection_stream_marks")
