"""Database backends of the log: the port, and one module per database.

The PostgreSQL module is imported only when a PostgreSQL URL is given, so the
embedded default works without the ``postgres`` extra installed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

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


def insert_rows(conn: Connection, insert: Insert, rows: Sequence[Mapping[str, Any]]) -> None:
    """A plain ``INSERT`` (it returns nothing) of ``rows``, all with the same keys.

    On PostgreSQL through the driver's own cursor, the SQL compiled once and
    SQLAlchemy's bind processors applied to the values
    (:func:`eventstore.backends.postgres.insert_rows`): SQLAlchemy's execution of
    a statement cost about as much CPU as the driver's, for each of a store's graph
    rows.  SQLite runs in the process, and its rows go through SQLAlchemy.
    """
    if conn.dialect.name == "postgresql":
        from eventstore.backends.postgres import insert_rows as postgres_insert_rows

        postgres_insert_rows(conn, insert, rows)
        return
    conn.execute(insert, list(rows))


def insert_replacing(conn: Connection, table: sa.Table) -> Insert:
    """``INSERT`` into ``table`` whose row replaces the other columns of a row with the
    same primary key, in the one statement (``ON CONFLICT (key) DO UPDATE`` on both
    databases; the rows of one statement must have distinct keys).

    Each row finds its conflict through the key's unique index, whatever the
    planner knows: a ``DELETE`` of the keys first, its replacement, is planned
    from table statistics, and without them PostgreSQL scanned a subject's
    every vector row to delete a page's (see VectorStore.put_vectors).
    """
    return _replacing(conn.dialect.name == "postgresql", table)


@functools.cache
def _replacing(on_postgres: bool, table: sa.Table) -> Insert:
    """Built once per table and database kind (a statement is immutable): building it
    cost about as much CPU as running it, and the vector state upserts after each store."""
    insert = postgres_insert(table) if on_postgres else sqlite_insert(table)
    return insert.on_conflict_do_update(
        index_elements=list(table.primary_key.columns),
        set_={c.name: insert.excluded[c.name] for c in table.columns if not c.primary_key},
    )


__all__ = ["Backend", "create_backend", "insert_replacing", "insert_rows", "sent_together"]
