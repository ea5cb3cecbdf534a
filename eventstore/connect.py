"""Choosing a backend from a database URL.

The PostgreSQL module is imported only when a PostgreSQL URL is given, so the
embedded default works without the ``postgres`` extra installed.
"""

from __future__ import annotations

from eventstore.backend import Backend
from eventstore.errors import InvalidInputError


def create_backend(url: str) -> Backend:
    """A backend for ``sqlite:///path`` or ``postgresql://…`` URLs."""
    if url.startswith("sqlite:"):
        from eventstore.sqlite import SQLiteBackend, create_sqlite_engine

        return SQLiteBackend(create_sqlite_engine(url))
    if url.startswith(("postgresql", "postgres:")):
        from eventstore.postgres import PostgresBackend, create_postgres_engine

        return PostgresBackend(create_postgres_engine(url))
    raise InvalidInputError("database URL must start with sqlite:/// or postgresql://")
