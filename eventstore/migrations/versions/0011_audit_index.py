"""The audit index: the audit page's filters without reading the whole stream

One row per audit entry (its version, event id, time, namespace, action and the
pseudonymous subject and actor references).  Existing entries are indexed from
the stream the first time the audit page is read (a migration has no keys).
"""

from __future__ import annotations

import sqlalchemy as sa

from eventstore.migrations.ops import column, create_table, drop_table

revision = "es0011"
down_revision = "es0010"

INDEXES = [
    ["namespace", "version"],
    ["subject_ref", "version"],
    ["actor_ref", "version"],
    ["action", "version"],
    ["recorded_at"],
]


def upgrade() -> None:
    create_table(
        "audit_index",
        column("version", sa.BigInteger(), autoincrement=False),
        column("event_id", sa.Uuid()),
        column("recorded_at", sa.DateTime()),
        column("namespace", sa.String(length=64), null=True),
        column("action", sa.String(length=64)),
        column("subject_ref", sa.String(length=128), null=True),
        column("actor_ref", sa.String(length=128), null=True),
        key=["version"],
        indexes=INDEXES,
    )


def downgrade() -> None:
    drop_table("audit_index", indexes=INDEXES)
