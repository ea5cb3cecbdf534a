"""The store's identity: a random id recorded in its own database on first open.

The id names the store's keyring file (kept apart from the data), so any copy
of the database says which keyring it needs, and a listing of keyrings can
tell which stores still exist.
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, make_url

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


@dataclass(frozen=True)
class StoreLookup:
    """What a database holds, as a listing of keyrings asks without opening a store:
    ``found`` (with its id, None if it never recorded one, and where: ``detail``),
    ``gone`` (no database, or no store in it) or ``unreachable`` (cannot say)."""

    state: str
    store_id: uuid.UUID | None
    detail: str


def look_up_store(database: str) -> StoreLookup:
    """The store id recorded in ``database`` (a URL), read without changing anything."""
    url = make_url(database)
    if url.get_backend_name() != "sqlite":
        return _look_up_server(database)
    path = Path(url.database or "")
    if not path.is_file():
        return StoreLookup("gone", None, f"no database at {path}")

    # Read-only: looking must not touch a store, not even its WAL.
    def read_only() -> sqlite3.Connection:
        return sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)

    engine = sa.create_engine("sqlite://", creator=read_only, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            found = read_store_id(conn)
    except (sa.exc.DBAPIError, ValueError) as e:
        return StoreLookup("gone", None, f"{path} is not an oblivio database ({e})")
    finally:
        engine.dispose()
    return StoreLookup("found", found, str(path))


def _look_up_server(database: str) -> StoreLookup:
    """A PostgreSQL store: asked with the credentials of the environment (PGPASSWORD, …)."""
    from eventstore.backends.postgres import normalise_postgres_url

    engine = sa.create_engine(normalise_postgres_url(database), connect_args={"connect_timeout": 5})
    try:
        with engine.connect() as conn:
            found = read_store_id(conn)
    except sa.exc.OperationalError as e:
        if "does not exist" in str(e):
            return StoreLookup("gone", None, "the database does not exist any more")
        return StoreLookup("unreachable", None, "the database server cannot be reached from here")
    except sa.exc.ProgrammingError:
        return StoreLookup("gone", None, "the database holds no oblivio store")
    finally:
        engine.dispose()
    return StoreLookup("found", found, "the database")
