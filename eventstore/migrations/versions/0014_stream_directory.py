"""The stream directory: a subject's generations by (namespace, subject_key, generation)

``stream_directory`` names the stream of each subject generation; it is where a
subject's stream is looked up and what keeps a generation from being created
twice, so that ``streams`` is addressed by stream id alone (on a Citus cluster it
then lives on the shard of its events: eventstore.backends.citus).  Existing
streams are copied in with their ids, and new ids continue after them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from eventstore.migrations.ops import BigId, Digest, column, create_table

revision = "es0014"
down_revision = "es0013"


def upgrade() -> None:
    create_table(
        "stream_directory",
        sa.Column("stream_id", BigId, primary_key=True, autoincrement=True),
        column("namespace", sa.String(64)),
        column("subject_key", Digest),
        column("generation", sa.Integer),
        sa.UniqueConstraint(
            "namespace",
            "subject_key",
            "generation",
            name="uq_stream_directory_namespace_subject_key_generation",
        ),
        key=["stream_id"],
        sqlite_autoincrement=True,
    )
    op.execute(
        "INSERT INTO stream_directory (stream_id, namespace, subject_key, generation)"
        " SELECT stream_id, namespace, subject_key, generation FROM streams"
    )
    if op.get_bind().dialect.name == "postgresql":
        # SQLite's AUTOINCREMENT continues after the largest id inserted; a sequence
        # does not know of ids given to it.
        op.execute(
            "SELECT setval(pg_get_serial_sequence('stream_directory', 'stream_id'),"
            " coalesce(max(stream_id), 0) + 1, false) FROM stream_directory"
        )


def downgrade() -> None:
    op.drop_table("stream_directory")
