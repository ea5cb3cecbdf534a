"""The embedded default: one SQLite file, WAL, one writer at a time."""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import sqlite as sqlite_dialect
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
        # The connection appends at a remembered head run on (``append_connection``),
        # kept checked out while the store is open: taking one from the pool and
        # giving it back (SQLAlchemy's checkout, its reset on return, a new
        # ``Connection``) cost about 20 µs of CPU a store, some 6 % of one.  Used
        # only by the thread holding ``_writer``.
        self._appending: Connection | None = None

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
        self,
        conn: Connection,
        batch: SealedBatch,
        derived: Sequence[DerivedRows],
        *,
        last: bool = False,
    ) -> list[Placement] | None:
        # In the process: nothing to send together (a COMMIT costs no wait either,
        # so ``last`` changes nothing), the statements run in turn, the
        # derived rows only once the head has moved.  Through the driver's own
        # connection (in the caller's transaction), each statement's SQL built once
        # and the columns' bind processors applied here: SQLAlchemy's execution of a
        # statement cost more CPU than SQLite's, and a store runs five.
        driver = conn.connection.driver_connection
        assert driver is not None  # a live pooled connection
        if driver.execute(_MOVE_HEAD_SQL, head_params(batch)).rowcount != 1:
            return None
        rows = event_rows(batch, commit_group=0)
        if len(rows) == 1:  # the common case: the new rowid is the position
            placements = [(_insert_rows(driver, events, rows, False), 0)]
        else:
            # The caller holds the only write lock, and AUTOINCREMENT gives each
            # new row one more than the largest rowid the table ever had, so the
            # rows of one batch get consecutive positions up to the last one.
            end = _insert_rows(driver, events, rows, False)
            placements = [(position, 0) for position in range(end - len(rows) + 1, end + 1)]
        for part in derived:
            if part.rows:
                _insert_rows(driver, part.table, part.rows, part.unless_present)
        return placements

    @contextmanager
    def append_connection(self) -> Iterator[Connection]:
        # One BEGIN IMMEDIATE transaction, durable (synchronous=FULL): SQLite's
        # single writer makes the head the caller remembers either current or
        # moved, and the append's condition tells which.  Begun and ended on the
        # driver's connection, as ``append`` writes (SQLAlchemy's transaction
        # bookkeeping cost as much CPU as the append's statements).
        with self._writer, self.translate_errors():
            conn = self._append_connection()
            driver = conn.connection.driver_connection
            assert driver is not None  # a live pooled connection
            driver.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                driver.execute("ROLLBACK")
                raise
            driver.execute("COMMIT")

    def _append_connection(self) -> Connection:
        """The connection kept for appends (the caller holds ``_writer``), opened anew
        after it was closed or invalidated."""
        kept = self._appending
        if kept is None or kept.closed or kept.invalidated:
            kept = self._appending = self.engine.connect()
        return kept

    def dispose(self) -> None:
        with self._writer:
            if self._appending is not None:
                self._appending.close()
                self._appending = None
        super().dispose()

    @contextmanager
    def translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sa.exc.DBAPIError as e:
            _raise_translated(e.orig, e)
            raise
        except sqlite3.Error as e:  # from append, which uses the driver's connection
            _raise_translated(e, e)
            raise


def _raise_translated(orig: BaseException | None, e: Exception) -> None:
    if isinstance(orig, sqlite3.IntegrityError):
        raise ConflictError(f"conflicting write: {orig}") from e
    if isinstance(orig, sqlite3.OperationalError):
        raise OperationalError(f"SQLite could not complete the operation: {orig}") from e


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
_MOVE_HEAD_SQL = str(_MOVE_HEAD)


def _insert_rows(
    driver: sqlite3.Connection,
    table: sa.Table,
    rows: Sequence[Mapping[str, Any]],
    unless_present: bool,
) -> int:
    """``rows`` (all with the same keys) into ``table`` through the driver; the last
    row's rowid."""
    sql, processors = _driver_insert(table, tuple(rows[0]), unless_present)
    values = [dict(row) for row in rows]
    for row in values:
        for name, process in processors:
            if row[name] is not None:
                row[name] = process(row[name])
    if len(values) == 1:
        cursor = driver.execute(sql, values[0])
        assert cursor.lastrowid is not None  # a successful INSERT sets it
        return cursor.lastrowid
    driver.executemany(sql, values)
    return int(driver.execute("SELECT last_insert_rowid()").fetchone()[0])


@functools.lru_cache(maxsize=64)
def _driver_insert(
    table: sa.Table, columns: tuple[str, ...], unless_present: bool
) -> tuple[str, tuple[tuple[str, Callable[[Any], Any]], ...]]:
    """The driver's SQL of an INSERT of ``columns`` into ``table`` and the bind processors
    of those columns that have one (UTC datetimes, UUIDs as SQLAlchemy stores them)."""
    verb = "INSERT OR IGNORE" if unless_present else "INSERT"
    names = ", ".join(columns)
    sql = f"{verb} INTO {table.name} ({names}) VALUES ({', '.join(':' + c for c in columns)})"
    dialect = _DIALECT
    processors = tuple(
        (c, process)
        for c in columns
        if (process := table.c[c].type.bind_processor(dialect)) is not None
    )
    return sql, processors


_DIALECT = sqlite_dialect.dialect()
