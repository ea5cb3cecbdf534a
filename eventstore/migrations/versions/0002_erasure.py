"""erasure requests, rebuild jobs, certificates"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import BigId, Digest, column, create_table, drop_table

revision = "es0002"
down_revision = "es0001"

_REBUILD_JOBS_INDEXES = [["request_id"], ["status", "run_after"]]


def upgrade() -> None:
    create_table(
        "api_keys",
        column("key_id", sa.String(length=32)),
        column("secret_hash", Digest),
        column("principal", sa.String(length=16)),
        column("sealed_user_id", sa.LargeBinary(), null=True),
        column("subject_ref", sa.String(length=64), null=True),
        column("created_at", sa.DateTime()),
        column("revoked_at", sa.DateTime(), null=True),
        key=["key_id"],
    )
    create_table(
        "apscheduler_jobs",
        column("id", sa.Unicode(length=191)),
        column("next_run_time", sa.Float(precision=25), null=True),
        column("job_state", sa.LargeBinary()),
        key=["id"],
        indexes=[["next_run_time"]],
    )

    create_table(
        "certificates",
        column("certificate_id", sa.Uuid()),
        column("request_id", sa.Uuid()),
        column("subject_key", Digest),
        column("issued_at", sa.DateTime()),
        column("jws", sa.Text()),
        sa.UniqueConstraint("request_id", name=op.f("uq_certificates_request_id")),
        key=["certificate_id"],
        indexes=[["subject_key"]],
    )

    create_table(
        "erasure_requests",
        column("request_id", sa.Uuid()),
        column("kind", sa.String(length=32)),
        column("namespace", sa.String(length=64)),
        column("subject_key", Digest),
        column("stream_id", BigId, null=True),
        column("status", sa.String(length=16)),
        column("legal_ground", sa.String(length=64)),
        column("reason", sa.String(length=64)),
        column("requested_by", sa.String(length=64), null=True),
        column("received_at", sa.DateTime()),
        column("deadline_at", sa.DateTime()),
        column("erased_at", sa.DateTime(), null=True),
        column("completed_at", sa.DateTime(), null=True),
        column("overdue_at", sa.DateTime(), null=True),
        column("events_erased", sa.Integer()),
        column("version_from", sa.BigInteger(), null=True),
        column("version_to", sa.BigInteger(), null=True),
        column("merkle_root", Digest),
        column("dek_id", sa.Uuid(), null=True),
        column("kek_version", sa.Integer(), null=True),
        column("key_destroyed_at", sa.DateTime(), null=True),
        column("chain_head", Digest, null=True),
        column("stream_version", sa.BigInteger(), null=True),
        column("certificate_id", sa.Uuid(), null=True),
        column("error", sa.String(length=500), null=True),
        key=["request_id"],
        indexes=[["subject_key"]],
    )

    create_table(
        "rebuild_jobs",
        column("job_id", sa.Uuid()),
        column("request_id", sa.Uuid()),
        column("projection", sa.String(length=64)),
        column("projection_version", sa.Integer()),
        column("stream_id", BigId, null=True),
        column("status", sa.String(length=16)),
        column("attempts", sa.Integer()),
        column("max_attempts", sa.Integer()),
        column("run_after", sa.DateTime()),
        column("lease_owner", sa.String(length=100), null=True),
        column("lease_expires_at", sa.DateTime(), null=True),
        column("last_error", sa.String(length=500), null=True),
        column("position", sa.String(length=64), null=True),
        column("state_digest", sa.String(length=64), null=True),
        column("replay_digest", sa.String(length=64), null=True),
        column("created_at", sa.DateTime()),
        column("finished_at", sa.DateTime(), null=True),
        key=["job_id"],
        indexes=_REBUILD_JOBS_INDEXES,
    )

    create_table(
        "scheduler_leases",
        column("name", sa.String(length=100)),
        column("owner", sa.String(length=100)),
        column("expires_at", sa.DateTime()),
        key=["name"],
    )


def downgrade() -> None:
    drop_table("api_keys")
    drop_table("apscheduler_jobs", indexes=[["next_run_time"]])
    drop_table("scheduler_leases")
    drop_table("rebuild_jobs", indexes=_REBUILD_JOBS_INDEXES)
    drop_table("erasure_requests", indexes=[["subject_key"]])
    drop_table("certificates", indexes=[["subject_key"]])
