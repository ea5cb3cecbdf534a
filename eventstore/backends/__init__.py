"""Database backends of the log: the port, and one module per database.

The PostgreSQL module is imported only when a PostgreSQL URL is given, so the
embedded default works without the ``postgres`` extra installed.
"""

from __future__ import annotations

from eventstore.backends.port import Backend
from eventstore.errors import InvalidInputError


def create_backend(url: str) -> Backend:
    """A backend for ``sqlite:///path`` or ``postgresql://…`` URLs."""
    if url.startswith("sqlite:"):
        from eventstore.backends.sqlite import SQLiteBackend, create_sqlite_engine

        return SQLiteBackend(create_sqlite_engine(url))
    if url.startswith(("postgresql", "postgres:")):
        from eventstore.backends.postgres import PostgresBackend

        return PostgresBackend(url)
    raise InvalidInputError("database URL must start with sqlite:/// or postgresql://")


__all__ = ["Backend", "create_backend"]
