"""The embedded default: one SQLite file, WAL, one writer at a time."""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.dml import Insert

from eventstore.backend import Backend, head_params
from eventstore.batch import Placement, SealedBatch
from eventstore.codec import WrappedKey
from eventstore.companions import bound_row
from eventstore.errors import ConflictError, OperationalError
from eventstore.reader import RowTypes
from eventstore.schema import events

T = TypeVar("T")

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


# The column formats SQLAlchemy uses on SQLite (Uuid as 32 hex digits,
# DateTime as ISO text with microseconds): raw statements must write and
# read exactly these, or SQLAlchemy's own queries would not match them.
def _db_time(value: datetime) -> str:
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


def _utc_from_db(value: str) -> datetime:
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def _uuid_from_db(value: str) -> uuid.UUID:
    return uuid.UUID(hex=value)


class SQLiteBackend(Backend):
    name = "sqlite"
    embedded = True
    paramstyle = "named"
    # The group is always 0: the position alone is the global order, and a
    # range on the rowid is the cheapest seek SQLite has.
    log_order = (events.c.position,)
    row_types = RowTypes(_uuid_from_db, _utc_from_db)

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        # Writers of this process queue here instead of in SQLite's busy
        # handler, whose sleeps let one writer starve the others (p99 of
        # hundreds of ms with 8 threads).  Reentrant, so a thread that already
        # writes is never blocked by itself.
        self._writer = threading.RLock()

    @contextmanager
    def write_connection(self) -> Iterator[Connection]:
        with self._writer, self.translate_errors(), self.engine.connect() as conn:
            yield conn.execution_options(**{_WRITE_OPTION: True})

    @contextmanager
    def read_connection(self) -> Iterator[Connection]:
        with self.translate_errors(), self.engine.connect() as conn:
            yield conn

    def insert_ignoring_duplicates(self, table: sa.Table) -> Insert:
        return sqlite_insert(table).on_conflict_do_nothing()

    def after_cursor(self) -> sa.ColumnElement[bool]:
        # The group is always 0 here.  A row-value comparison would make SQLite
        # seek only on the group and scan every earlier row on each page.
        return events.c.position > sa.bindparam("position", type_=sa.BigInteger())

    def visible_commit_groups(self, column: sa.ColumnElement[int]) -> sa.ColumnElement[bool]:
        # A reader's snapshot sees only committed rows, and no later commit can
        # receive a smaller position, so everything visible may be delivered.
        return sa.true()

    def insert_events(self, conn: Connection, batch: SealedBatch) -> list[Placement] | None:
        driver: sqlite3.Connection = conn.connection.driver_connection  # type: ignore[assignment]
        return self._insert_events(driver, batch)

    def append_committed(self, batch: SealedBatch) -> list[Placement] | None:
        return self._committed(lambda driver: self._insert_events(driver, batch))

    def _insert_events(
        self, driver: sqlite3.Connection, batch: SealedBatch
    ) -> list[Placement] | None:
        placements = _insert_events(driver, batch)
        if placements is not None:
            # In the same write transaction as the head move: committed with
            # it, or rolled back with it when a companion row fails.
            self._insert_companions(driver, batch)
        return placements

    def _insert_companions(self, driver: sqlite3.Connection, batch: SealedBatch) -> None:
        dialect = self.engine.dialect
        for companion in batch.companions:
            rows = [bound_row(companion.table, row, dialect) for row in companion.rows]
            driver.executemany(_insert_sql(companion.table), rows)

    def create_stream_committed(
        self, seal: Callable[[int], SealedBatch], key: WrappedKey
    ) -> tuple[SealedBatch, list[Placement]] | None:
        return self._committed(lambda driver: self._create_stream(driver, seal, key))

    def _committed(self, write: Callable[[sqlite3.Connection], T | None]) -> T | None:
        """``write`` in a transaction of its own: committed, or rolled back when it gives None.

        On the pooled sqlite3 connection itself, without SQLAlchemy's
        ``Connection`` around it: it would cost more than the statements.
        """
        with self._writer, self.translate_errors():
            pooled = self.engine.raw_connection()
            driver: sqlite3.Connection = pooled.driver_connection  # type: ignore[assignment]
            try:
                driver.execute("BEGIN IMMEDIATE")
                try:
                    written = write(driver)
                except BaseException:
                    driver.execute("ROLLBACK")
                    raise
                driver.execute("ROLLBACK" if written is None else "COMMIT")
                return written
            finally:
                pooled.close()

    def _create_stream(
        self, driver: sqlite3.Connection, seal: Callable[[int], SealedBatch], key: WrappedKey
    ) -> tuple[SealedBatch, list[Placement]] | None:
        # BEGIN IMMEDIATE holds the only write lock: the next AUTOINCREMENT id
        # is ours, and the ciphertexts can be bound to it before the insert.
        (stream_id,) = driver.execute(_NEXT_STREAM_ID).fetchone()
        batch = seal(stream_id)
        now = _db_time(batch.recorded_at)
        stream = batch.stream
        created = driver.execute(
            _INSERT_STREAM,
            (
                stream_id,
                stream.namespace,
                stream.subject_key,
                stream.generation,
                batch.new_version,
                batch.chain_hash,
                now,
            ),
        )
        if created.rowcount != 1:
            return None
        driver.execute(_INSERT_KEY, (key.dek_id.hex, stream_id, key.kek_version, key.wrapped, now))
        placements = _insert_rows(driver, _event_rows(batch))
        self._insert_companions(driver, batch)
        return batch, placements

    @contextmanager
    def translate_errors(self) -> Iterator[None]:
        # Driver errors arrive wrapped by SQLAlchemy, or bare from the hot
        # paths that use the driver's cursor directly.
        try:
            yield
        except sa.exc.DBAPIError as e:
            _raise_translated(e.orig, e)
            raise
        except sqlite3.Error as e:
            _raise_translated(e, e)
            raise


def _raise_translated(orig: BaseException | None, e: Exception) -> None:
    if isinstance(orig, sqlite3.IntegrityError):
        raise ConflictError(f"conflicting write: {orig}") from e
    if isinstance(orig, sqlite3.OperationalError):
        raise OperationalError(f"SQLite could not complete the operation: {orig}") from e


# The head moves only if it is still where the writer saw it, for an open
# generation whose data key lives (see eventstore.postgres for the same rule).
_MOVE_HEAD = """
UPDATE streams SET version = :new_version, chain_hash = :chain_hash
WHERE stream_id = :stream_id AND version = :old_version
  AND closed_at IS NULL AND key_destroyed_at IS NULL
"""
_NEXT_STREAM_ID = """
SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'streams'), 0),
           coalesce((SELECT max(stream_id) FROM streams), 0)) + 1
"""
_INSERT_STREAM = """
INSERT INTO streams (stream_id, namespace, subject_key, generation, version, chain_hash,
                     created_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING
"""
_INSERT_KEY = """
INSERT INTO data_keys (dek_id, stream_id, kek_version, wrapped_key, created_at)
VALUES (?, ?, ?, ?, ?)
"""
_INSERT_EVENT = """
INSERT INTO events (commit_group, event_id, stream_id, version, type, schema_version,
                    recorded_at, payload, digest, chain_hash)
VALUES (0, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_LAST_POSITION = "SELECT last_insert_rowid()"


_NAMED_PARAMETERS = SQLiteDialect_pysqlite(paramstyle="named")


@functools.cache
def _insert_sql(table: sa.Table) -> str:
    """``INSERT`` of a whole row of ``table``, for the driver's named parameters."""
    values: dict[str, Any] = {c.name: sa.bindparam(c.name) for c in table.c}
    return str(table.insert().values(values).compile(dialect=_NAMED_PARAMETERS))


def _insert_events(driver: sqlite3.Connection, batch: SealedBatch) -> list[Placement] | None:
    if driver.execute(_MOVE_HEAD, head_params(batch)).rowcount != 1:
        return None
    return _insert_rows(driver, _event_rows(batch))


def _insert_rows(driver: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[Placement]:
    """Insert event rows in version order; their placements, without reading them back.

    The position is the rowid.  The caller holds the only write lock, and
    AUTOINCREMENT gives each new row one more than the largest rowid the
    table ever had, so the rows of one batch get consecutive positions up to
    the last one inserted.  One event, the common case, needs no query for it.
    """
    if len(rows) == 1:
        position = driver.execute(_INSERT_EVENT, rows[0]).lastrowid
        assert position is not None  # a successful INSERT sets it
        return [(position, 0)]
    driver.executemany(_INSERT_EVENT, rows)
    (last,) = driver.execute(_LAST_POSITION).fetchone()
    return [(position, 0) for position in range(last - len(rows) + 1, last + 1)]


def _event_rows(batch: SealedBatch) -> list[tuple[Any, ...]]:
    recorded_at = _db_time(batch.recorded_at)
    stream_id = batch.stream.stream_id
    return [
        (
            event.event_id.hex,
            stream_id,
            version,
            event.type,
            event.schema_version,
            recorded_at,
            batch.ciphertexts[i],
            batch.digests[i],
            batch.chain_hashes[i],
        )
        for i, (event, version) in enumerate(zip(batch.events, batch.versions, strict=True))
    ]
