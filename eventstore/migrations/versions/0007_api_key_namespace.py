"""Every API key belongs to a namespace (NULL: an explicit cluster-wide operator key)

Existing keys move to the namespace they were used in: a user key to the
namespace of its user's stream (its ``subject_ref`` is that stream's subject
key), every other key, and a user key whose user never wrote, to the namespace
the server ran with, ``OBLIVIO_NAMESPACE`` (``default`` when unset): run
``oblivio db upgrade`` with the server's settings.  No existing key becomes
cluster-wide.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import op

from eventstore.ids import check_namespace

revision = "es0007"
down_revision = "es0006"

_keys = sa.table(
    "api_keys",
    sa.column("key_id", sa.String()),
    sa.column("subject_ref", sa.String()),
    sa.column("namespace", sa.String()),
)
_streams = sa.table(
    "streams", sa.column("namespace", sa.String()), sa.column("subject_key", sa.LargeBinary())
)


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("namespace", sa.String(length=64), nullable=True))
    served = check_namespace(os.environ.get("OBLIVIO_NAMESPACE") or "default")
    conn = op.get_bind()
    for key_id, ref in conn.execute(sa.select(_keys.c.key_id, _keys.c.subject_ref)).all():
        namespace = served if ref is None else _namespace_of(conn, bytes.fromhex(ref)) or served
        conn.execute(_keys.update().where(_keys.c.key_id == key_id).values(namespace=namespace))


def _namespace_of(conn: sa.Connection, subject_key: bytes) -> str | None:
    query = sa.select(_streams.c.namespace).where(_streams.c.subject_key == subject_key).limit(1)
    found: str | None = conn.execute(query).scalar()
    return found


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("namespace")
