"""The embedded default: one SQLite file, WAL, one writer at a time."""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.dml import Insert

from eventstore.backends.port import Backend, head_params
from eventstore.batch import DerivedRows, Placement, SealedBatch, event_rows
from eventstore.errors import ConflictError, OperationalError
from eventstore.schema import events

DATABASE_FILE = "oblivio.sqlite3"
BUSY_TIMEOUT_MS = 30_000
_WRITE_OPTION = "oblivio_write"


def sqlite_url(data_dir: str | Path) -> str:
    """The SQLAlchemy URL of the database file inside ``data_dir``."""
    return f"sqlite:///{Path(data_dir) / DATABASE_FILE}"


def _configure_connection(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
    # Let SQLAlchemy's "begin" hook issue BEGIN itself (pysqlite would
    # otherwise start transactions lazily and defer write locks).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    # WAL lets readers run beside the single writer; synchronous=FULL makes
    # every acknowledged commit durable across power loss and kill -9;
    # secure_delete overwrites freed pages so erased ciphertext and destroyed
    # wrapped keys do not linger in the file's free list.
    for pragma in (
        "journal_mode=WAL",
        "synchronous=FULL",
        "secure_delete=ON",
        "foreign_keys=ON",
        f"busy_timeout={BUSY_TIMEOUT_MS}",
    ):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _begin(conn: Connection) -> None:
    # Writers take the write lock up front (BEGIN IMMEDIATE): a deferred
    # transaction that reads the stream head and then upgrades to a write lock
    # can fail with SQLITE_BUSY instead of waiting, losing the append.
    write = conn.get_execution_options().get(_WRITE_OPTION, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def _create_private(path: Path) -> None:
    """Create the data directory (0700) and database file (0600) before SQLite does.

    SQLite gives its -wal and -shm files the database file's mode, so these
    stay private too: even ciphertext and keyed hashes are nobody else's business.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))


def create_sqlite_engine(url: str) -> Engine:
    path = sa.engine.make_url(url).database
    if path and path != ":memory:":
        _create_private(Path(path))
    engine = sa.create_engine(url, connect_args={"check_same_thread": False})
    event.listen(engine, "connect", _configure_connection)
    event.listen(engine, "begin", _begin)
    return engine


class SQLiteBackend(Backend):
    name = "sqlite"
    embedded = True
    # The group is always 0: the position alone is the global order, and a
    # range on the rowid is the cheapest seek SQLite has.
    log_order = (events.c.position,)

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        # Writers of this process queue here instead of in SQLite's busy
        # handler, whose sleeps let one writer starve the others (p99 of
        # hundreds of ms with 8 threads).  Reentrant, so a thread that already
        # writes is never blocked by itself.
        self._writer = threading.RLock()

    @contextmanager
    def write_connection(self, *, durable: bool = True) -> Iterator[Connection]:
        with self._writer, self.translate_errors(), self.engine.connect() as conn:
            if durable:
                yield conn.execution_options(**{_WRITE_OPTION: True})
                return
            # In WAL mode, NORMAL skips the fsync of the commit but keeps it atomic
            # and ordered: a killed process loses nothing, a power loss at most the
            # last such commits (the next FULL commit syncs them).  The pragma is
            # refused inside a transaction, so it is set on the driver's connection
            # before BEGIN and put back before the connection returns to the pool.
            driver = conn.connection.driver_connection
            assert driver is not None  # a live pooled connection
            driver.execute("PRAGMA synchronous=NORMAL")
            try:
                yield conn.execution_options(**{_WRITE_OPTION: True})
            finally:
                driver.execute("PRAGMA synchronous=FULL")

    @contextmanager
    def read_connection(self) -> Iterator[Connection]:
        with self.translate_errors(), self.engine.connect() as conn:
            yield conn

    def statement_reads(self) -> AbstractContextManager[Connection]:
        # A read transaction costs no round trip on a local file.
        return self.read_connection()

    def insert_unless_present(self, table: sa.Table) -> Insert:
        return sqlite_insert(table).on_conflict_do_nothing()

    def after_cursor(self) -> sa.ColumnElement[bool]:
        # The group is always 0 here.  A row-value comparison would make SQLite
        # seek only on the group and scan every earlier row on each page.  A
        # reader's snapshot sees only committed rows, and no later commit can
        # receive a smaller position, so everything visible may be delivered.
        return events.c.position > sa.bindparam("position", type_=sa.BigInteger())

    def one_of(self, column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
        # SQLAlchemy expands the list into one placeholder per value when it runs.
        return column.in_(sa.bindparam(name, expanding=True))

    def append(
        self, conn: Connection, batch: SealedBatch, derived: Sequence[DerivedRows]
    ) -> list[Placement] | None:
        # In the process: nothing to send together, the statements run in turn, the
        # derived rows only once the head has moved.
        placements = self._append(conn, batch)
        if placements is not None:
            for part in derived:
                if part.rows:
                    conn.execute(_insert(part.table, part.unless_present), list(part.rows))
        return placements

    @contextmanager
    def append_connection(self) -> Iterator[Connection]:
        # One BEGIN IMMEDIATE transaction, durable (synchronous=FULL): SQLite's
        # single writer makes the head the caller remembers either current or
        # moved, and the append's condition tells which.
        with self.write_connection() as conn, conn.begin():
            yield conn

    def _append(self, conn: Connection, batch: SealedBatch) -> list[Placement] | None:
        if conn.execute(_MOVE_HEAD, head_params(batch)).rowcount != 1:
            return None
        rows = event_rows(batch, commit_group=0)
        if len(rows) == 1:  # the common case: the new rowid is the position
            inserted = conn.execute(events.insert(), rows[0]).inserted_primary_key
            assert inserted is not None  # a successful INSERT sets it
            return [(inserted[0], 0)]
        # The caller holds the only write lock, and AUTOINCREMENT gives each
        # new row one more than the largest rowid the table ever had, so the
        # rows of one batch get consecutive positions up to the last one.
        conn.execute(events.insert(), rows)
        last = conn.execute(_LAST_POSITION).scalar_one()
        return [(position, 0) for position in range(last - len(rows) + 1, last + 1)]

    @contextmanager
    def translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sa.exc.DBAPIError as e:
            if isinstance(e.orig, sqlite3.IntegrityError):
                raise ConflictError(f"conflicting write: {e.orig}") from e
            if isinstance(e.orig, sqlite3.OperationalError):
                raise OperationalError(f"SQLite could not complete the operation: {e.orig}") from e
            raise


# The head moves only if it is still where the writer saw it, for an open
# generation whose data key lives, unless restricted (the same rule as on PostgreSQL).
_MOVE_HEAD = sa.text(
    """
UPDATE streams SET version = :new_version, chain_hash = :chain_hash
WHERE stream_id = :stream_id AND version = :old_version
  AND closed_at IS NULL AND key_destroyed_at IS NULL
  AND (NOT restricted OR :past_restriction)
"""
)
_LAST_POSITION = sa.text("SELECT last_insert_rowid()")


@functools.cache
def _insert(table: sa.Table, unless_present: bool) -> Insert:
    """The INSERT of derived rows into ``table``, built once (a statement is immutable)."""
    return sqlite_insert(table).on_conflict_do_nothing() if unless_present else table.insert()
