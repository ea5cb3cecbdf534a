"""events.stream_id references streams on SQLite only

On PostgreSQL every event row is inserted FROM the stream row the same
statement has just moved or created (eventstore.postgres), and stream rows
are never deleted, so the foreign key could never fail; its trigger cost
about a sixth of a 100-event append's execution on the server.  SQLite keeps
it: there the check is a rowid lookup in a page the append has just written,
and dropping it would mean rebuilding the events table.
"""

from __future__ import annotations

from alembic import op

revision = "es0003"
down_revision = "es0002"

_EVENTS_STREAM_FK = "fk_events_stream_id_streams"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint(_EVENTS_STREAM_FK, "events", type_="foreignkey")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_foreign_key(_EVENTS_STREAM_FK, "events", "streams", ["stream_id"], ["stream_id"])
