"""The event log: streams, data keys, events."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import BigId, Digest, column, create_table

revision = "es0001"
down_revision = None
branch_labels = ("eventstore",)


def upgrade() -> None:
    create_table(
        "streams",
        sa.Column("stream_id", BigId, primary_key=True, autoincrement=True),
        column("namespace", sa.String(64)),
        column("subject_key", Digest),
        column("generation", sa.Integer),
        column("version", sa.BigInteger),
        column("chain_hash", Digest),
        column("created_at", sa.DateTime),
        column("closed_at", sa.DateTime, null=True),
        column("key_destroyed_at", sa.DateTime, null=True),
        sa.UniqueConstraint(
            "namespace",
            "subject_key",
            "generation",
            name="uq_streams_namespace_subject_key_generation",
        ),
        key=["stream_id"],
        sqlite_autoincrement=True,
    )
    create_table(
        "data_keys",
        column("dek_id", sa.Uuid),
        column("stream_id", BigId),
        column("kek_version", sa.Integer),
        column("wrapped_key", sa.LargeBinary),
        column("created_at", sa.DateTime),
        sa.UniqueConstraint("stream_id", name="uq_data_keys_stream_id"),
        sa.ForeignKeyConstraint(
            ["stream_id"],
            ["streams.stream_id"],
            name="fk_data_keys_stream_id_streams",
            ondelete="CASCADE",
        ),
        key=["dek_id"],
    )
    create_table(
        "events",
        sa.Column("position", BigId, primary_key=True, autoincrement=True),
        column("commit_group", sa.BigInteger),
        column("event_id", sa.Uuid),
        column("stream_id", BigId),
        column("version", sa.BigInteger),
        column("type", sa.String(100)),
        column("schema_version", sa.Integer),
        column("recorded_at", sa.DateTime),
        column("payload", sa.LargeBinary, null=True),
        column("digest", Digest),
        column("chain_hash", Digest),
        column("erased_at", sa.DateTime, null=True),
        column("erasure_request_id", sa.Uuid, null=True),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        sa.UniqueConstraint("stream_id", "version", name="uq_events_stream_id_version"),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["streams.stream_id"], name="fk_events_stream_id_streams"
        ),
        key=["position"],
        sqlite_autoincrement=True,
    )
    if op.get_bind().dialect.name == "postgresql":  # SQLite orders the log by rowid
        op.create_index("ix_events_commit_group_position", "events", ["commit_group", "position"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_events_commit_group_position", table_name="events")
    op.drop_table("events")
    op.drop_table("data_keys")
    op.drop_table("streams")
