"""memory_claims: structured claims of ingested messages"""

from __future__ import annotations

import sqlalchemy as sa

from eventstore.migrations.ops import Digest, StreamId, column, create_table, drop_table

revision = "pj0005"
down_revision = "pj0003"


def upgrade() -> None:
    create_table(
        "memory_claims",
        column("stream_id", StreamId),
        column("node_id", sa.Uuid()),
        column("event_id", sa.Uuid()),
        column("plan_event_id", sa.Uuid()),
        column("match_key", Digest),
        column("valid_from", sa.DateTime()),
        column("valid_to", sa.DateTime(), null=True),
        column("correction", sa.String(length=32)),
        key=["stream_id", "node_id"],
        indexes=[["stream_id", "match_key"]],
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    drop_table("memory_claims", indexes=[["stream_id", "match_key"]])
