"""The data-protection officer's desk: legal holds and the request register

``legal_holds``: a subject's erasure is refused while a hold (Art. 17(3)) is in
place.  ``subject_requests``: one row per data-subject request of any kind with
its legal and operational deadlines, status, reference and outcome.
"""

from __future__ import annotations

import sqlalchemy as sa

from eventstore.migrations.ops import Digest, column, create_table, drop_table

revision = "ap0002"
down_revision = "ap0001"

HOLD_INDEXES = [["namespace", "subject_key"]]
REQUEST_INDEXES = [["namespace", "received_at"], ["namespace", "subject_key"]]


def upgrade() -> None:
    create_table(
        "legal_holds",
        column("hold_id", sa.Uuid()),
        column("namespace", sa.String(length=64)),
        column("subject_key", Digest),
        column("ground", sa.String(length=32)),
        column("reference", sa.String(length=64)),
        column("placed_at", sa.DateTime()),
        column("placed_by", sa.String(length=64), null=True),
        column("lifted_at", sa.DateTime(), null=True),
        column("lifted_by", sa.String(length=64), null=True),
        key=["hold_id"],
        indexes=HOLD_INDEXES,
    )
    create_table(
        "subject_requests",
        column("request_id", sa.Uuid()),
        column("namespace", sa.String(length=64)),
        column("subject_key", Digest),
        column("kind", sa.String(length=32)),
        column("reference", sa.String(length=64), null=True),
        column("received_at", sa.DateTime()),
        column("legal_deadline_at", sa.DateTime()),
        column("extended_deadline_at", sa.DateTime(), null=True),
        column("extension_reason", sa.String(length=32), null=True),
        column("operational_deadline_at", sa.DateTime()),
        column("status", sa.String(length=16)),
        column("outcome", sa.String(length=64), null=True),
        column("completed_at", sa.DateTime(), null=True),
        column("overdue_at", sa.DateTime(), null=True),
        column("erasure_request_id", sa.Uuid(), null=True),
        column("requested_by", sa.String(length=64), null=True),
        sa.UniqueConstraint("erasure_request_id", name="uq_subject_requests_erasure_request_id"),
        key=["request_id"],
        indexes=REQUEST_INDEXES,
    )


def downgrade() -> None:
    drop_table("subject_requests", indexes=REQUEST_INDEXES)
    drop_table("legal_holds", indexes=HOLD_INDEXES)
