"""memory_node_directory keyed by stream: (stream_id, node_id), with an index by node id

Keyed by stream like the nodes, so that on a Citus cluster the directory's rows sit
on the stream's shard and a store writes one shard.  Rebuilt from memory_nodes, as
pj0002 built it: the entries of nodes erased since (which find no node) are not
carried over; replaying a stream writes its entries again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import StreamId, column, create_table, drop_table

revision = "pj0015"
down_revision = "pj0014"

_INDEXES = [["node_id"]]


def upgrade() -> None:
    drop_table("memory_node_directory")
    create_table(
        "memory_node_directory",
        column("stream_id", StreamId),
        column("node_id", sa.Uuid()),
        column("event_id", sa.Uuid()),
        column("ordinal", sa.Integer()),
        key=["stream_id", "node_id"],
        indexes=_INDEXES,
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO memory_node_directory (stream_id, node_id, event_id, ordinal) "
        "SELECT stream_id, node_id, event_id, ordinal FROM memory_nodes"
    )


def downgrade() -> None:
    drop_table("memory_node_directory", indexes=_INDEXES)
    create_table(
        "memory_node_directory",
        column("node_id", sa.Uuid()),
        column("event_id", sa.Uuid()),
        column("ordinal", sa.Integer()),
        key=["node_id"],
        sqlite_with_rowid=False,
    )
    op.execute(
        "INSERT INTO memory_node_directory (node_id, event_id, ordinal) "
        "SELECT node_id, event_id, ordinal FROM memory_nodes"
    )
