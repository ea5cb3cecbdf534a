"""The event log: streams, data keys, events.

Revision ID: es0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "es0001"
down_revision = None
branch_labels = ("eventstore",)
depends_on = None

BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "streams",
        sa.Column("stream_id", BigId, primary_key=True, autoincrement=True),
        sa.Column("namespace", sa.String(64), nullable=False),
        sa.Column("subject_key", sa.LargeBinary(32), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("chain_hash", sa.LargeBinary(32), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("closed_at", sa.DateTime, nullable=True),
        sa.Column("key_destroyed_at", sa.DateTime, nullable=True),
        sa.PrimaryKeyConstraint("stream_id", name="pk_streams"),
        sa.UniqueConstraint(
            "namespace",
            "subject_key",
            "generation",
            name="uq_streams_namespace_subject_key_generation",
        ),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "data_keys",
        sa.Column("dek_id", sa.Uuid, nullable=False),
        sa.Column("stream_id", BigId, nullable=False),
        sa.Column("kek_version", sa.Integer, nullable=False),
        sa.Column("wrapped_key", sa.LargeBinary, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.PrimaryKeyConstraint("dek_id", name="pk_data_keys"),
        sa.UniqueConstraint("stream_id", name="uq_data_keys_stream_id"),
        sa.ForeignKeyConstraint(
            ["stream_id"],
            ["streams.stream_id"],
            name="fk_data_keys_stream_id_streams",
            ondelete="CASCADE",
        ),
    )
    op.create_table(
        "events",
        sa.Column("position", BigId, primary_key=True, autoincrement=True),
        sa.Column("commit_group", sa.BigInteger, nullable=False),
        sa.Column("event_id", sa.Uuid, nullable=False),
        sa.Column("stream_id", BigId, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("recorded_at", sa.DateTime, nullable=False),
        sa.Column("payload", sa.LargeBinary, nullable=True),
        sa.Column("digest", sa.LargeBinary(32), nullable=False),
        sa.Column("chain_hash", sa.LargeBinary(32), nullable=False),
        sa.Column("erased_at", sa.DateTime, nullable=True),
        sa.Column("erasure_request_id", sa.Uuid, nullable=True),
        sa.PrimaryKeyConstraint("position", name="pk_events"),
        sa.UniqueConstraint("event_id", name="uq_events_event_id"),
        sa.UniqueConstraint("stream_id", "version", name="uq_events_stream_id_version"),
        sa.ForeignKeyConstraint(
            ["stream_id"], ["streams.stream_id"], name="fk_events_stream_id_streams"
        ),
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
