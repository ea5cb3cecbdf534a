"""erasure requests, rebuild jobs, certificates

Revision ID: es0002
Revises: es0001
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "es0002"
down_revision = "es0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(length=32), nullable=False),
        sa.Column("secret_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column("principal", sa.String(length=16), nullable=False),
        sa.Column("sealed_user_id", sa.LargeBinary(), nullable=True),
        sa.Column("subject_ref", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_api_keys")),
    )
    op.create_table(
        "apscheduler_jobs",
        sa.Column("id", sa.Unicode(length=191), nullable=False),
        sa.Column("next_run_time", sa.Float(precision=25), nullable=True),
        sa.Column("job_state", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_apscheduler_jobs")),
    )
    op.create_index(
        op.f("ix_apscheduler_jobs_next_run_time"), "apscheduler_jobs", ["next_run_time"]
    )

    op.create_table(
        "certificates",
        sa.Column("certificate_id", sa.Uuid(), nullable=False),
        sa.Column("request_id", sa.Uuid(), nullable=False),
        sa.Column("subject_key", sa.LargeBinary(length=32), nullable=False),
        sa.Column("issued_at", sa.DateTime(), nullable=False),
        sa.Column("jws", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("certificate_id", name=op.f("pk_certificates")),
        sa.UniqueConstraint("request_id", name=op.f("uq_certificates_request_id")),
    )
    with op.batch_alter_table("certificates", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_certificates_subject_key"), ["subject_key"], unique=False
        )

    op.create_table(
        "erasure_requests",
        sa.Column("request_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("namespace", sa.String(length=64), nullable=False),
        sa.Column("subject_key", sa.LargeBinary(length=32), nullable=False),
        sa.Column("stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("legal_ground", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("requested_by", sa.String(length=64), nullable=True),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.Column("deadline_at", sa.DateTime(), nullable=False),
        sa.Column("erased_at", sa.DateTime(), nullable=True),
        sa.Column("completed_at", sa.DateTime(), nullable=True),
        sa.Column("overdue_at", sa.DateTime(), nullable=True),
        sa.Column("events_erased", sa.Integer(), nullable=False),
        sa.Column("version_from", sa.BigInteger(), nullable=True),
        sa.Column("version_to", sa.BigInteger(), nullable=True),
        sa.Column("merkle_root", sa.LargeBinary(length=32), nullable=False),
        sa.Column("dek_id", sa.Uuid(), nullable=True),
        sa.Column("kek_version", sa.Integer(), nullable=True),
        sa.Column("key_destroyed_at", sa.DateTime(), nullable=True),
        sa.Column("chain_head", sa.LargeBinary(length=32), nullable=True),
        sa.Column("stream_version", sa.BigInteger(), nullable=True),
        sa.Column("certificate_id", sa.Uuid(), nullable=True),
        sa.Column("error", sa.String(length=500), nullable=True),
        sa.PrimaryKeyConstraint("request_id", name=op.f("pk_erasure_requests")),
    )
    with op.batch_alter_table("erasure_requests", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_erasure_requests_subject_key"), ["subject_key"], unique=False
        )

    op.create_table(
        "rebuild_jobs",
        sa.Column("job_id", sa.Uuid(), nullable=False),
        sa.Column("request_id", sa.Uuid(), nullable=False),
        sa.Column("projection", sa.String(length=64), nullable=False),
        sa.Column("projection_version", sa.Integer(), nullable=False),
        sa.Column("stream_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("run_after", sa.DateTime(), nullable=False),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(), nullable=True),
        sa.Column("last_error", sa.String(length=500), nullable=True),
        sa.Column("position", sa.String(length=64), nullable=True),
        sa.Column("state_digest", sa.String(length=64), nullable=True),
        sa.Column("replay_digest", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_rebuild_jobs")),
    )
    with op.batch_alter_table("rebuild_jobs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_rebuild_jobs_request_id"), ["request_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_rebuild_jobs_status_run_after"), ["status", "run_after"], unique=False
        )

    op.create_table(
        "scheduler_leases",
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("owner", sa.String(length=100), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_scheduler_leases")),
    )


def downgrade() -> None:
    op.drop_table("api_keys")
    op.drop_index(op.f("ix_apscheduler_jobs_next_run_time"), table_name="apscheduler_jobs")
    op.drop_table("apscheduler_jobs")

    op.drop_table("scheduler_leases")
    with op.batch_alter_table("rebuild_jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_rebuild_jobs_status_run_after"))
        batch_op.drop_index(batch_op.f("ix_rebuild_jobs_request_id"))

    op.drop_table("rebuild_jobs")
    with op.batch_alter_table("erasure_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_erasure_requests_subject_key"))

    op.drop_table("erasure_requests")
    with op.batch_alter_table("certificates", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_certificates_subject_key"))

    op.drop_table("certificates")
