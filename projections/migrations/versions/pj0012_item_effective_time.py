"""memory_items.occurred_at: a keyed item's revisions in the order their values took effect;
an index of claims by effective time

An item's current revision is the one whose value took effect last, not the
one stored last: a revision stored with an earlier ``occurred_at`` is history
(issue 30).  The effective time is in the encrypted event, which SQL cannot
read: existing rows start effective when they were recorded, and every stream
with items is marked in memory_graph_backfills, so its node graph (its item
rows with it) is rebuilt from the log once, as migration pj0008 arranged
(``oblivio rebuild graphs`` does every marked stream at once).  A back-dated
claim finds the corrections effective after it by ``ix_memory_claims_stream_id_valid_from``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "pj0012"
down_revision = "pj0011"


def upgrade() -> None:
    op.create_index(
        "ix_memory_claims_stream_id_valid_from",
        "memory_claims",
        ["stream_id", "valid_from"],
        unique=False,
    )
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.add_column(sa.Column("occurred_at", sa.DateTime(), nullable=True))
    op.execute("UPDATE memory_items SET occurred_at = recorded_at")
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.alter_column("occurred_at", existing_type=sa.DateTime(), nullable=False)
    # Joined on the stream id (the distribution column on Citus), not a NOT IN.
    op.execute(
        "INSERT INTO memory_graph_backfills (stream_id) SELECT DISTINCT i.stream_id"
        " FROM memory_items i LEFT JOIN memory_graph_backfills b ON b.stream_id = i.stream_id"
        " WHERE b.stream_id IS NULL"
    )


def downgrade() -> None:
    op.drop_index("ix_memory_claims_stream_id_valid_from", table_name="memory_claims")
    with op.batch_alter_table("memory_items", schema=None) as batch_op:
        batch_op.drop_column("occurred_at")
