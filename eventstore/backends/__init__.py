"""Database backends of the log: the port, and one module per database.

The PostgreSQL module is imported only when a PostgreSQL URL is given, so the
embedded default works without the ``postgres`` extra installed.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from sqlalchemy.engine import Connection

from eventstore.backends.port import Backend
from eventstore.errors import InvalidInputError


def create_backend(url: str) -> Backend:
    """A backend for ``sqlite:///path`` or ``postgresql://…`` URLs (Citus when the
    database has the extension; this connects once to find out)."""
    if url.startswith("sqlite:"):
        from eventstore.backends.sqlite import SQLiteBackend, create_sqlite_engine

        return SQLiteBackend(create_sqlite_engine(url))
    if url.startswith(("postgresql", "postgres:")):
        from eventstore.backends.citus import CitusBackend, has_citus
        from eventstore.backends.postgres import PostgresBackend

        # A database with the Citus extension is a cluster's coordinator: its
        # log order needs the cluster's horizon (eventstore.backends.citus).
        return CitusBackend(url) if has_citus(url) else PostgresBackend(url)
    raise InvalidInputError("database URL must start with sqlite:/// or postgresql://")


def sent_together(conn: Connection) -> AbstractContextManager[None]:
    """A block of INSERTs whose results nobody reads, sent to the database in one round
    trip where that saves waits: on PostgreSQL a pipeline
    (:func:`eventstore.backends.postgres.pipelined`); SQLite runs in the process, and
    its statements are not sent anywhere."""
    if conn.dialect.name == "postgresql":
        from eventstore.backends.postgres import pipelined

        return pipelined(conn)
    return nullcontext()


__all__ = ["Backend", "create_backend", "sent_together"]
