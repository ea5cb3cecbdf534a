"""The store's identity: a random id recorded in its own database on first open.

The id names the store's keyring file (kept apart from the data), so any copy
of the database says which keyring it needs, and a listing of keyrings can
tell which stores still exist.
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.backends.port import Backend
from eventstore.schema import store_identity, streams

_STORE_ID = "store_id"
_SELECT_STORE_ID = sa.select(store_identity.c.value).where(store_identity.c.name == _STORE_ID)


def read_store_id(conn: Connection) -> uuid.UUID | None:
    """The recorded id, or None for a store that was never opened (or predates ids)."""
    value = conn.execute(_SELECT_STORE_ID).scalar()
    return None if value is None else uuid.UUID(value)


def store_id(backend: Backend) -> uuid.UUID:
    """The store's id, recorded now if it has none; concurrent first opens agree on one."""
    with backend.read_connection() as conn:
        found = read_store_id(conn)
    if found is not None:
        return found
    with backend.write_connection() as conn, conn.begin():
        conn.execute(
            backend.insert_unless_present(store_identity).values(
                name=_STORE_ID, value=str(uuid.uuid4())
            )
        )
        # Ours, or the one a concurrent first open inserted before us.
        return uuid.UUID(conn.execute(_SELECT_STORE_ID).scalar_one())


def holds_streams(backend: Backend) -> bool:
    """Whether anything was ever written under the store's keys (then it needs its keyring)."""
    with backend.read_connection() as conn:
        return conn.execute(sa.select(streams.c.stream_id).limit(1)).first() is not None
