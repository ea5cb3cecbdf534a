"""PostgreSQL through psycopg 3: many API and worker processes share one server.

The global order.  Positions come from a sequence, and sequence values are
handed out when rows are inserted, not when transactions commit: a writer can
take position 7, stay open, and commit after position 8 was committed and
already delivered to a subscriber, which would then skip 7 for ever.  The
common cure, a table lock around every append, serialises all writers.

Instead each row records the id of the transaction that wrote it
(``pg_current_xact_id()``, a 64-bit xid8 that never wraps) and the log is
ordered by ``(commit_group, position)``.  A reader only delivers rows whose
transaction id is below a *horizon*: the oldest transaction still running
that may write to this database (``_HORIZON`` below says how that is known).
Every transaction below the horizon that could have written here has
finished, so no row can ever appear behind a delivered one, and writers never
wait for each other except on the same stream.  The price is liveness, not
safety: a long-running transaction holding a transaction id in *this*
database holds delivery back until it ends.  Transactions of other databases
on the same server do not (the server-wide ``pg_snapshot_xmin`` once did).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
import psycopg.errors
import sqlalchemy as sa
from psycopg import pq
from psycopg.abc import Buffer
from psycopg.adapt import Transformer
from psycopg.types.datetime import TimestampLoader, TimestamptzBinaryLoader
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection
from sqlalchemy.sql.dml import Insert

from eventstore.backends.port import Backend
from eventstore.batch import DerivedRows, Placement, SealedBatch
from eventstore.errors import ConflictError, DuplicateEventError, OperationalError
from eventstore.schema import events

# Driver errors that mean "try again": lost connections, serialisation
# failures, deadlocks, lock timeouts.
_RETRYABLE = (
    psycopg.OperationalError,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
)

# The append, in one statement (one wait).  The head moves only if it is still
# where the writer saw it, and only for an open generation whose data key lives
# and whose subject's processing is not restricted (unless the batch may pass a
# restriction, ``past_restriction``); the events and the rows derived from them
# (the inline projection's) are inserted only FROM the moved head, each in a
# data-modifying CTE of the same statement, so a head found elsewhere writes
# nothing at all.  That condition is the append's only guard when it runs at a
# head the process remembers (``append_connection``, autocommitted); under the
# stream row's lock it holds, and guards again against a close, a key
# destruction (which stamps ``key_destroyed_at`` on the stream row) or a
# restriction (``restricted``, set with the register row).  The events have no
# foreign key on PostgreSQL (see eventstore.schema): they only ever come FROM
# the stream row.
_HEAD_MOVE = """
WITH head AS (
    UPDATE streams SET version = %s, chain_hash = %s
    WHERE stream_id = %s AND version = %s
      AND closed_at IS NULL AND key_destroyed_at IS NULL
      AND (NOT restricted OR %s)
    RETURNING stream_id
),
appended AS (
INSERT INTO events (commit_group, event_id, stream_id, version, type, schema_version,
                    recorded_at, payload, digest, chain_hash)
"""
_APPEND_MANY = """SELECT pg_current_xact_id()::text::bigint, e.event_id, head.stream_id, e.version,
       e.type, e.schema_version, %s, e.payload, e.digest, e.chain_hash
FROM head, unnest(%b::uuid[], %b::bigint[], %b::text[], %b::int[], %b::bytea[], %b::bytea[],
                  %b::bytea[])
     AS e(event_id, version, type, schema_version, payload, digest, chain_hash)
ORDER BY e.version
RETURNING position, commit_group, version
)"""
# The same for a batch of one event (every store): its values as scalars.
# psycopg dumps each array parameter above in Python, about 30 µs of CPU for the
# seven of one event against 2 µs for seven scalars (measured at a load of 12), the
# largest part of the append's own CPU.  The event is the head's new version and
# its chain hash the head's new hash, so it takes those parameters.  INSERT …
# SELECT gives the untyped text parameter its column's type.  Parameters are
# positional (see ``_append_statement``): naming each of a store's forty cost more
# CPU than the database's whole share of the statement's work on the client.
_APPEND_ONE = """SELECT pg_current_xact_id()::text::bigint, %b, head.stream_id,
       %s, %s, %s, %s, %b, %b, %s
FROM head
RETURNING position, commit_group, version
)"""
_APPENDED = "\nSELECT position, commit_group, version FROM appended"


# The delivery horizon, evaluated once per statement (an InitPlan).  Only a
# backend connected to this database can insert into its events table (a
# backend never changes database; a prepared transaction can only be finished
# from the database that prepared it), so a running transaction that provably
# belongs to ANOTHER database can be ignored; the horizon is the smallest
# remaining candidate:
#
# - the snapshot's running top-level xids (``pg_snapshot_xip``; rows carry the
#   top-level xid, pg_current_xact_id(), also when written in a subtransaction),
#   minus those proven foreign: a pg_stat_activity row of another database
#   with that ``backend_xid``, or a pg_prepared_xacts row of another database
#   (prepared transactions have no pg_stat_activity row).  ``backend_xid`` and
#   ``datid`` are shown to every role, not only to superusers and
#   pg_read_all_stats.  An xid nobody claims (it ended between the snapshot and
#   these reads, it is being prepared, the backend has no database) stays a
#   candidate: treating a foreign xid as ours costs liveness, never safety;
# - the snapshot's xmax: nothing at or above it had started;
# - our own xid, if this transaction has one (the snapshot leaves it out of xip);
# - the snapshot's xmin when xip does not list it.  A normal snapshot's xmin is
#   the least of xip, our own xid and xmax, so this adds nothing; a hot
#   standby's snapshot lists no xids in xip at all (they go to subxip, which
#   pg_current_snapshot omits), and there the horizon stays the plain xmin.
#
# Why never skip: a row whose commit group is below the horizon was written by
# a transaction that either ended before the statement's snapshot (so the scan,
# which shares that snapshot, sees all its rows) or was running then in
# another database (so it has no rows here).  Why a match is proof: the
# snapshot is taken when the statement starts, and pg_stat_activity is read
# later, while the statement runs; each of its rows copies a backend's status
# (with its datid) and then reads the xid of the backend in that slot.  A
# backend publishes its status before it can get an xid, and an xid listed in
# the snapshot was given out before the status copy, so the backend holding
# it then held the slot since before the copy: the datid is its own.  The
# 32-bit ``backend_xid`` names one full xid: PostgreSQL never lets the xids in
# use span 2^31, and both were running within one statement.
#
# Two consequences for callers.  The activity view is read once per
# transaction and then cached, so the horizon must be read in a statement
# whose transaction had not read it before its snapshot: an autocommit
# statement (``statement_reads``) or a transaction's first statement.  And the
# horizon is not monotonic: a foreign xid ignored by one statement may end
# between the next statement's snapshot and its activity read and hold that
# statement back, a little.  Each page is still consistent on its own (a
# cursor only moves to rows delivered), and the store passes the highest
# commit group its reads have shown as ``settled`` (``greatest`` below):
# every writer up to it had ended then, and no read of it shows less later.
#
# Not excluded: transactions of THIS database that will never touch the log
# (another application's, a forgotten idle session's).  Telling them apart
# would need every appender to lock the table before taking an xid (a
# transaction can hold an xid for a while before its first insert), so they
# hold delivery back like oblivio's own; docs/concepts.md says how to bound
# them (idle_in_transaction_session_timeout) and find them.
_HORIZON = """(
SELECT least(
    pg_snapshot_xmax(snap.s),
    pg_current_xact_id_if_assigned(),
    (SELECT min(running.xid)
       FROM pg_snapshot_xip(snap.s) AS running(xid)
      WHERE NOT EXISTS (SELECT FROM pg_stat_activity AS a
                         WHERE a.backend_xid = xid(running.xid) AND a.datid <> snap.db)
        AND NOT EXISTS (SELECT FROM pg_prepared_xacts AS p
                         WHERE p.transaction = xid(running.xid)
                           AND p.database <> current_database())),
    CASE WHEN pg_snapshot_xmin(snap.s) <> ALL (SELECT pg_snapshot_xip(snap.s))
         THEN pg_snapshot_xmin(snap.s) END
)::text::bigint
FROM (SELECT pg_current_snapshot() AS s,
             (SELECT oid FROM pg_database WHERE datname = current_database()) AS db) AS snap
)"""

#: The horizon's SQL, for the backend built on this one (eventstore.backends.citus).
HORIZON = _HORIZON

# Each of the two engines' pools (SQLAlchemy's QueuePool), counted in docs/operations.md.
# All fifteen are kept once opened: the pool opens a connection only when every
# open one is busy, so an idle process still holds only what its busiest moment
# needed.  Overflow connections were closed on return, and a server with more
# concurrent requests than the pool size paid a new connection (a backend
# process forked by PostgreSQL) for every few requests.
POOL_SIZE = 15
MAX_OVERFLOW = 0
_RECYCLE_SECONDS = 1800


def normalise_postgres_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` and select the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url.split('://')[0]}://…")


# ``timestamp`` (naive UTC, see eventstore.schema.UTCDateTime) and
# ``timestamptz`` share one binary form, microseconds since 2000 UTC: loading
# the former as the latter gives UTC-aware datetimes in C, with no per-row
# conversion in Python.  The session's TimeZone=UTC makes them carry UTC.
_TIMESTAMP_OID = 1114


def _engine(url: str, *, session: str = "-c TimeZone=UTC", **options: Any) -> sa.Engine:
    # No pre-ping: it would cost a round trip per checkout.  A connection
    # that died with the server fails its statement with OperationalError
    # (retryable) and SQLAlchemy discards the stale pool.
    engine = sa.create_engine(
        normalise_postgres_url(url),
        pool_size=POOL_SIZE,
        max_overflow=MAX_OVERFLOW,
        pool_recycle=_RECYCLE_SECONDS,
        connect_args={"options": session},
        **options,
    )
    sa.event.listen(engine, "connect", _load_timestamps_aware)
    return engine


def _load_timestamps_aware(driver: psycopg.Connection[Any], _record: object) -> None:
    # Once per connection, so that its binary cursors (fetch's) inherit it:
    # registering it on each cursor copied the cursor's loader map every read.
    # SQLAlchemy's own statements use text cursors and keep the text loader.
    driver.adapters.register_loader(_TIMESTAMP_OID, TimestamptzBinaryLoader)


_DURABLE_OPTION = "oblivio_durable"

# What a write transaction's first statement is sent with: BEGIN, and for a
# commit that need not be durable the setting that lets it return before the
# WAL flush (the server stays consistent after a crash: it may lose the last
# such commits, never a part of one; the setting ends with the transaction).
_BEGIN = (b"BEGIN",)
_BEGIN_NOT_DURABLE = (b"BEGIN", b"SET LOCAL synchronous_commit = off")

# A transaction begun whose BEGIN is not sent yet (in its connection's info).
# psycopg sends its own BEGIN before a transaction's first statement and waits
# for it (a pipeline waits for it too): one round trip of its own.  Instead
# BEGIN waits here and goes out with the first statement, in the same simple
# query when that statement is a hot read (``fetch``: a write transaction's
# first statement is its stream's lock), or just before it otherwise.  psycopg
# reads the transaction's status from libpq, so it then sends no BEGIN, and it
# ends the transaction as any other.
_UNSENT_BEGIN = "oblivio_unsent_begin"


# Writes owed to a transaction's COMMIT (``PostgresBackend.write_at_commit``): their
# SQL with its values bound in, sent in one simple query with the COMMIT.
_OWED_AT_COMMIT = "oblivio_owed_at_commit"


def _begin(conn: Connection) -> None:
    driver = conn.connection.driver_connection
    if driver is None or driver.autocommit:  # SQLAlchemy begins; the server never does
        return
    durable = conn.get_execution_options().get(_DURABLE_OPTION, True)
    conn.info[_UNSENT_BEGIN] = _BEGIN if durable else _BEGIN_NOT_DURABLE


def _forget_owed(conn: Connection) -> None:
    if not conn.invalidated:  # an invalidated one has no info left to clean
        conn.info.pop(_UNSENT_BEGIN, None)
        conn.info.pop(_OWED_AT_COMMIT, None)


def _forget_owed_at_checkin(_driver: object, record: ConnectionPoolEntry) -> None:
    # A transaction that ended without a statement leaves nothing owed behind.
    record.info.pop(_UNSENT_BEGIN, None)
    record.info.pop(_OWED_AT_COMMIT, None)


def _committing_owed(plain: Callable[[Any], None]) -> Callable[[Any], None]:
    """The dialect's ``do_commit``, sending the writes owed to the COMMIT
    (``PostgresBackend.write_at_commit``) and the COMMIT in one simple query.

    psycopg then finds the transaction ended (it reads the status from libpq)
    and sends nothing.  A failing write stops the query before the COMMIT, and
    its error ends the commit as a failing COMMIT would (the pool rolls back).
    In ``do_commit``, not in a ``commit`` event: SQLAlchemy's listeners of that
    event run before it with the transaction still open, whatever their order.
    """

    def do_commit(connection: PoolProxiedConnection) -> None:
        owed: list[bytes] = connection.info.pop(_OWED_AT_COMMIT, [])
        unsent: tuple[bytes, ...] = connection.info.get(_UNSENT_BEGIN, ())
        driver = connection.driver_connection
        if driver is not None:
            # A BEGIN still owed (no statement ran) is sent only for owed writes,
            # those owed to the next statement (``write_before_next``) included.
            begin = _begin_with(connection, driver)
            if owed or unsent not in ((), _BEGIN, _BEGIN_NOT_DURABLE):
                _exec_simple(driver, begin + b"".join(owed) + b"COMMIT")
        plain(connection)

    return do_commit


def _begin_with(conn: Connection | PoolProxiedConnection, driver: psycopg.Connection[Any]) -> bytes:
    """The statements still owed before the transaction's next one (``b""`` if none),
    each followed by ``;``, as one simple query takes them (see ``_owed``)."""
    return b"".join(s + b"; " for s in _owed(conn, driver))


def _owed(
    conn: Connection | PoolProxiedConnection, driver: psycopg.Connection[Any]
) -> tuple[bytes, ...]:
    """The statements still owed before the transaction's next one, taken: its BEGIN
    (only if no transaction is open: a caller that went to the driver directly has
    already made psycopg open one), then writes owed to the next statement
    (``PostgresBackend.write_before_next``)."""
    owed: tuple[bytes, ...] = conn.info.pop(_UNSENT_BEGIN, ())
    if driver.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        owed = tuple(s for s in owed if s != b"BEGIN")
    return owed


def _driver(conn: Connection) -> psycopg.Connection[Any]:
    """The driver's connection under ``conn``, with any BEGIN it owes sent."""
    driver: psycopg.Connection[Any] | None = conn.connection.driver_connection
    assert driver is not None  # a live pooled connection
    if _UNSENT_BEGIN in conn.info:  # never on an autocommit connection (an append's)
        owed = _begin_with(conn, driver)
        if owed:
            _exec_simple(driver, owed)
    return driver


def _send_owed_begin(conn: Connection, *_: Any) -> None:
    # Before each of SQLAlchemy's own statements (its cursors are psycopg's).
    if _UNSENT_BEGIN in conn.info:
        _driver(conn)


def _exec_simple(driver: psycopg.Connection[Any], sql: bytes) -> pq.abc.PGresult:
    """``sql`` (one or more statements) as one simple query; the last one's result."""
    result = driver.pgconn.exec_(sql)
    if result.status in (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK):
        return result
    if driver.pgconn.status == pq.ConnStatus.BAD:  # as psycopg reports a lost connection
        raise psycopg.OperationalError(pq.error_message(driver.pgconn))
    raise psycopg.errors.error_from_result(result, driver.info.encoding)


class _KeptConnection:
    """One connection of a pool kept checked out, lent to one borrower at a time.

    It is not lent again once invalidated (a failed statement found it broken),
    once kept longer than the pool's recycle age (the pool would not lend it), in a
    forked child (which must not use, nor close, its parent's session), nor after
    :meth:`close`.  A connection given back that is not idle outside a
    transaction, or while another is kept, goes back to its pool.
    """

    def __init__(self) -> None:
        self._kept: tuple[Connection, float, int] | None = None
        self._lock = threading.Lock()
        self._open = True

    def take(self) -> Connection | None:
        with self._lock:
            kept, self._kept = self._kept, None
        if kept is None:
            return None
        conn, since, pid = kept
        if pid != os.getpid():
            return None
        if conn.invalidated or time.monotonic() - since > _RECYCLE_SECONDS:
            conn.close()
            return None
        return conn

    def give_back(self, conn: Connection) -> None:
        driver = None if conn.invalidated else conn.connection.driver_connection
        if driver is not None and driver.pgconn.transaction_status == pq.TransactionStatus.IDLE:
            with self._lock:
                if self._kept is None and self._open:
                    since = conn.info.setdefault(_KEPT_SINCE, time.monotonic())
                    self._kept = (conn, since, os.getpid())
                    return
        conn.close()

    def close(self) -> None:
        with self._lock:
            kept, self._kept, self._open = self._kept, None, False
        if kept is not None and kept[2] == os.getpid():
            kept[0].close()


# When a connection was first kept (in its info, which lives as long as its session): its
# age, as the pool's recycling counts it from when it opened.
_KEPT_SINCE = "oblivio_kept_since"


def _end_open_transaction(driver: psycopg.Connection[Any], _record: object, _state: object) -> None:
    """Roll back a connection of the autocommit pool that comes back inside a transaction
    (or broken: the rollback then fails, and the pool discards the connection)."""
    if driver.pgconn.transaction_status != pq.TransactionStatus.IDLE:
        driver.rollback()


class _UTCTimestampLoader(TimestampLoader):
    """A ``timestamp`` column's text (naive UTC, see eventstore.schema.UTCDateTime)
    as an aware datetime, as fetch's binary cursors load it."""

    def load(self, data: Buffer) -> datetime:
        return super().load(data).replace(tzinfo=UTC)


class PostgresBackend(Backend):
    name = "postgresql"
    embedded = False
    log_order = (events.c.commit_group, events.c.position)

    #: Session settings of the main pool's connections.
    session_options = "-c TimeZone=UTC"

    def __init__(self, url: str) -> None:
        super().__init__(_engine(url, session=self.session_options))
        sa.event.listen(self.engine, "begin", _begin)
        sa.event.listen(self.engine, "before_cursor_execute", _send_owed_begin)
        dialect = self.engine.dialect
        dialect.do_commit = _committing_owed(dialect.do_commit)  # type: ignore[method-assign,assignment]
        sa.event.listen(self.engine, "rollback", _forget_owed)
        sa.event.listen(self.engine, "checkin", _forget_owed_at_checkin)
        # A pool of its own whose connections stay in autocommit: a statement
        # read sends no BEGIN or ROLLBACK.  Lending the main pool's connections
        # in autocommit instead (execution_options) switched them on every
        # checkout and return, and made a 200-event stream read about twice as
        # slow as this.
        #
        # Its sessions never sort.  The planner has no statistics for the log
        # page's conditions (a row-value comparison, the snapshot horizon,
        # ``stream_id % count``) and guesses that a few hundred rows match, so
        # it prefers fetching the whole rest of the log through a bitmap scan
        # and sorting it over walking the (commit_group, position) index until
        # the page is full: every page then costs as much as the whole
        # remaining log.  Every statement read is served by an index in the
        # order it asks for, so ruling sorts out costs the others nothing.
        #
        # Its connections are never inside a transaction unless a statement sent
        # its own BEGIN, so the pool rolls back only such a one when it comes back
        # (``_end_open_transaction``), not every one: that rollback sends nothing to
        # the server and cost every store's append 1-3 µs of client CPU.
        self._autocommit = _engine(
            url,
            session="-c TimeZone=UTC -c enable_sort=off",
            isolation_level="AUTOCOMMIT",
            pool_reset_on_return=None,
        )
        sa.event.listen(self._autocommit.pool, "reset", _end_open_transaction)
        self._driver_sql: dict[sa.ClauseElement, tuple[str, dict[str, Any]]] = {}
        # One connection of the autocommit pool kept checked out for the appends at
        # a remembered head (``append_connection``) and lent to one at a time:
        # checking a ``Connection`` out of the pool and back cost each store 18-27 µs
        # of client CPU.  An append that finds it lent takes one from the pool.
        self._kept = _KeptConnection()

    @contextmanager
    def write_connection(self, *, durable: bool = True) -> Iterator[Connection]:
        # READ COMMITTED is enough: appends lock their stream row FOR UPDATE,
        # and uniqueness constraints back up every invariant.
        with self.translate_errors(), self.engine.connect() as conn:
            yield conn if durable else conn.execution_options(**{_DURABLE_OPTION: False})

    @contextmanager
    def read_connection(self) -> Iterator[Connection]:
        # Begun here, not by the view's first statement: its BEGIN is then owed
        # (``_begin``) and goes out with that statement when it is a hot read
        # (``fetch``), one wait for both; psycopg's own BEGIN waited on its own.
        with self.translate_errors(), self.engine.connect() as conn, conn.begin():
            yield conn
            # Ended by the block's COMMIT, not by the pool's ROLLBACK (the same for a
            # transaction that wrote nothing, and one round trip either way): psycopg
            # forgets every statement it prepared on the connection at a ROLLBACK and
            # deallocates them on the server, one more round trip, so a read view
            # cost the statements of the next five uses their preparation again.

    @contextmanager
    def statement_reads(self) -> Iterator[Connection]:
        with self.translate_errors(), self._autocommit.connect() as conn:
            yield conn

    def fetch(
        self, conn: Connection, query: sa.Select[Any], params: dict[str, Any]
    ) -> list[Sequence[Any]]:
        # psycopg's own cursor in binary mode: SQLAlchemy's per-row result
        # processing (Row objects, a type processor per datetime) cost more
        # than decrypting the events, and the SQL is compiled once per query.
        sql, constants = self._driver_sql.get(query) or self._compiled(query)
        if _UNSENT_BEGIN in conn.info:
            return _first_fetch(conn, sql, constants | params)
        with binary_cursor(conn) as cursor:
            cursor.execute(sql, constants | params)
            rows: list[Sequence[Any]] = cursor.fetchall()
            return rows

    def write_at_commit(self, conn: Connection, statement: Any, params: dict[str, Any]) -> None:
        # Bound into the SQL text, as for a transaction's first read (``_first_fetch``):
        # a simple query takes no parameters.
        conn.info.setdefault(_OWED_AT_COMMIT, []).append(
            self._bound(conn, _driver(conn), statement, params) + b"; "
        )

    def insert_before_next(self, conn: Connection, insert: Insert, row: Mapping[str, Any]) -> None:
        # Owed like a BEGIN not sent yet (``_UNSENT_BEGIN``), so every way a next
        # statement goes out takes it first: in the same simple query as a hot
        # read, in the append's pipeline, with the COMMIT, or just before.  Bound
        # into the SQL text (a simple query takes no parameters), after the
        # columns' bind processors (UTC datetimes made naive).
        driver = conn.connection.driver_connection
        assert driver is not None  # a live pooled connection
        sql, processors = _insert_of(insert, row, conn.dialect)
        values = dict(row)
        for name, process in processors:
            values[name] = process(values[name])
        with psycopg.ClientCursor(driver) as cursor:
            bound = cursor.mogrify(sql, values).encode(driver.info.encoding)
        conn.info[_UNSENT_BEGIN] = (*conn.info.get(_UNSENT_BEGIN, ()), bound)

    def _bound(
        self,
        conn: Connection,
        driver: psycopg.Connection[Any],
        statement: Any,
        params: dict[str, Any],
    ) -> bytes:
        """``statement`` (built once) with ``params`` bound into its SQL text."""
        sql, constants = self._driver_sql.get(statement) or self._compiled(statement)
        with psycopg.ClientCursor(driver) as cursor:
            return cursor.mogrify(sql, constants | params).encode(driver.info.encoding)

    def _compiled(self, statement: sa.ClauseElement) -> tuple[str, dict[str, Any]]:
        compiled = self._driver_sql[statement] = _compile(statement, self.engine.dialect)
        return compiled

    def insert_unless_present(self, table: sa.Table) -> Insert:
        return pg_insert(table).on_conflict_do_nothing()

    def after_cursor(self) -> sa.ColumnElement[bool]:
        # A row-value comparison, which the (group, position) index serves,
        # and only commit groups below the horizon (see ``_HORIZON``), or
        # below what the caller already knows had settled.
        after = sa.tuple_(events.c.commit_group, events.c.position) > sa.tuple_(
            sa.bindparam("group", type_=sa.BigInteger()),
            sa.bindparam("position", type_=sa.BigInteger()),
        )
        horizon = sa.func.greatest(
            sa.literal_column(_HORIZON, sa.BigInteger),
            sa.bindparam("settled", type_=sa.BigInteger()),
        )
        return sa.and_(after, events.c.commit_group < horizon)

    def one_of(self, column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
        # One array parameter: the SQL stays the same for any number of values.
        return column == sa.any_(sa.bindparam(name, type_=ARRAY(column.type)))

    def append(
        self,
        conn: Connection,
        batch: SealedBatch,
        derived: Sequence[DerivedRows],
        *,
        last: bool = False,
    ) -> list[Placement] | None:
        sql, params = _append_statement(batch, derived, conn.dialect)
        # psycopg's cursor in binary mode: the arrays of ids, ciphertexts and
        # hashes go over as they are, without text escaping on either side.
        # Not prepared up front: preparing costs a wait of its own, once per
        # connection and shape; psycopg prepares the shapes that recur (every
        # store's) after a few uses, and a batch of a size seen once is never.
        if last:
            # The COMMIT in the same pipeline: a head found elsewhere made the
            # statement write nothing, so committing with it is always safe.
            with _committing_after(conn) as cursor:
                cursor.execute(sql, params)
            rows = cursor.fetchall()
            cursor.close()
        else:
            with binary_cursor(conn) as cursor:
                cursor.execute(sql, params)
                rows = cursor.fetchall()
        if not rows:
            return None
        return [(position, group) for position, group, _ in sorted(rows, key=lambda r: r[2])]

    @contextmanager
    def append_connection(self) -> Iterator[Connection]:
        # Autocommit: the append is one statement, its own transaction, committed
        # durably (the autocommit pool keeps synchronous_commit on) when it returns:
        # one wait for the whole store.  Errors translated here, not by a
        # ``translate_errors`` block around it: one generator less for every store.
        try:
            conn = self._kept.take() or self._autocommit.connect()
            try:
                yield conn
            finally:
                self._kept.give_back(conn)
        except (sa.exc.DBAPIError, psycopg.Error) as e:
            _raise_translated_error(e)
            raise

    def dispose(self) -> None:
        self._kept.close()
        self._autocommit.dispose()
        super().dispose()

    @contextmanager
    def translate_errors(self) -> Iterator[None]:
        try:
            yield
        except (sa.exc.DBAPIError, psycopg.Error) as e:
            _raise_translated_error(e)
            raise


def _append_statement(
    batch: SealedBatch, derived: Sequence[DerivedRows], dialect: sa.Dialect
) -> tuple[str, list[Any]]:
    """The append of ``batch`` with its ``derived`` rows, and its parameters in the
    order of their placeholders: the head's, the events', then each derived row's."""
    params: list[Any] = [
        batch.new_version,
        batch.chain_hash,
        batch.stream.stream_id,
        batch.old_version,
        batch.past_restriction,
    ]
    # The column holds naive UTC, as SQLAlchemy's UTCDateTime writes it.
    recorded_at = batch.recorded_at.astimezone(UTC).replace(tzinfo=None)
    events = batch.events
    if len(events) == 1:
        [event] = events
        params += (
            event.event_id,
            batch.new_version,
            event.type,
            event.schema_version,
            recorded_at,
            batch.ciphertexts[0],
            batch.digests[0],
            batch.chain_hash,
        )
    else:
        params += (
            recorded_at,
            [e.event_id for e in events],
            list(batch.versions),
            [e.type for e in events],
            [e.schema_version for e in events],
            batch.ciphertexts,
            batch.digests,
            batch.chain_hashes,
        )
    shape: list[tuple[sa.Table, tuple[str, ...], int, bool]] = []
    for part in derived:
        if not part.rows:
            continue
        columns = tuple(part.rows[0])
        shape.append((part.table, columns, len(part.rows), part.unless_present))
        processors = _bind_processors(part.table, columns, dialect)
        for row in part.rows:
            values = [row[column] for column in columns]
            for n, process in processors:
                if values[n] is not None:
                    values[n] = process(values[n])
            params += values
    return _append_sql(len(events) == 1, tuple(shape)), params


@functools.lru_cache(maxsize=256)
def _append_sql(
    one_event: bool, derived: tuple[tuple[sa.Table, tuple[str, ...], int, bool], ...]
) -> str:
    """The append's SQL for one shape of derived rows (each part: table, columns, row
    count, whether present rows are skipped): each part a CTE inserting FROM the
    moved head.  Each value is cast to its column's type, as a VALUES list needs."""
    dialect = _DIALECT
    sql = _HEAD_MOVE + (_APPEND_ONE if one_event else _APPEND_MANY)
    for n, (table, columns, count, unless_present) in enumerate(derived):
        row = "(" + ", ".join(f"CAST(%s AS {table.c[c].type.compile(dialect)})" for c in columns)
        rows = ", ".join([row + ")"] * count)
        names = ", ".join(columns)
        # Names from the schema's tables, values only as parameters.
        sql += (
            f",\nr{n} AS (INSERT INTO {table.name} ({names})"  # noqa: S608
            f" SELECT v.* FROM head, (VALUES {rows}) AS v({names})"
            + (" ON CONFLICT DO NOTHING)" if unless_present else ")")
        )
    return sql + _APPENDED


_DIALECT = postgresql.dialect()  # type: ignore[no-untyped-call]


@functools.lru_cache(maxsize=64)
def _bind_processors(
    table: sa.Table, columns: tuple[str, ...], dialect: sa.Dialect
) -> tuple[tuple[int, Callable[[Any], Any]], ...]:
    """The bind processors of ``columns`` of ``table`` that have one (UTC datetimes made
    naive, as UTCDateTime writes them), each with its column's index in ``columns``:
    a row's values are taken in one pass and only these few are processed."""
    processors = ((n, table.c[c].type.bind_processor(dialect)) for n, c in enumerate(columns))
    return tuple((n, process) for n, process in processors if process is not None)


@contextmanager
def _committing_after(conn: Connection) -> Iterator[psycopg.Cursor[Any]]:
    """A binary cursor for the block's statements, sent in one pipeline after what the
    transaction still owes before them (its BEGIN, writes owed to the next statement)
    and before the writes owed to the COMMIT (``PostgresBackend.write_at_commit``) and
    the COMMIT itself: one wait for all of them, where the COMMIT alone waited once
    more.  The cursor's rows are there once the block has ended.

    An error of a statement skips the rest of the pipeline, COMMIT included: it is
    raised at the block's end with the transaction still open, which the caller
    rolls back as before.  The transaction's own commit then finds it ended
    (psycopg reads the status from libpq) and sends nothing.
    """
    driver = conn.connection.driver_connection
    assert driver is not None  # a live pooled connection
    cursor = driver.cursor(binary=True)
    with _invalidated_if_broken(conn, driver), driver.pipeline():
        with driver.cursor() as owed:
            for statement in _owed(conn, driver):
                owed.execute(statement)
        yield cursor
        with driver.cursor() as commit:
            for statement in conn.info.pop(_OWED_AT_COMMIT, []):
                commit.execute(statement)
            commit.execute(b"COMMIT")


@contextmanager
def pipelined(conn: Connection) -> Iterator[None]:
    """Send the block's statements in one round trip: psycopg's pipeline mode.

    Only for statements whose results nobody reads (plain INSERTs: SQLAlchemy
    finds no rows to describe, as for any INSERT).  Each would otherwise wait
    for the server in turn; here they go out together and the block's end
    waits once for all of them.  An error of any of them is raised there, inside
    the caller's transaction and error translation, and the transaction rolls
    back as it would have.
    """
    driver = _driver(conn)
    if driver.pgconn.pipeline_status != pq.PipelineStatus.OFF:
        # Inside another pipeline (the append's): its end waits for these too.
        # psycopg's nested pipeline would wait for what was sent before it.
        yield
        return
    with driver.pipeline():
        yield


# A plain INSERT as the driver runs it: its SQL, and the bind processors of its
# parameters that have one (UTC datetimes made naive, as UTCDateTime writes them).
_Processors = tuple[tuple[str, Callable[[Any], Any]], ...]
_insert_sql: dict[tuple[Insert, frozenset[str]], tuple[str, _Processors]] = {}


def _insert_of(
    insert: Insert, row: Mapping[str, Any], dialect: sa.Dialect
) -> tuple[str, _Processors]:
    """``insert`` (built once) of rows with ``row``'s keys, as the driver runs it."""
    key = (insert, frozenset(row))
    compiled = _insert_sql.get(key)
    if compiled is None:
        compiled = _insert_sql[key] = _compile_insert(insert, list(row), dialect)
    return compiled


def insert_rows(conn: Connection, insert: Insert, rows: Sequence[Mapping[str, Any]]) -> None:
    """See :func:`eventstore.backends.insert_rows`; in the caller's pipeline, if any."""
    if not rows:
        return
    sql, processors = _insert_of(insert, rows[0], conn.dialect)
    values = [dict(row) for row in rows]
    for row in values:
        for name, process in processors:
            row[name] = process(row[name])
    driver = _driver(conn)
    with _invalidated_if_broken(conn, driver), driver.cursor() as cursor:
        cursor.executemany(sql, values)


def _compile_insert(
    insert: Insert, keys: list[str], dialect: sa.Dialect
) -> tuple[str, _Processors]:
    compiled = insert.compile(dialect=dialect, column_keys=keys)
    processors = tuple(
        (name, process)
        for name, bind in compiled.binds.items()
        if (process := bind.type.bind_processor(dialect)) is not None
    )
    return str(compiled), processors


@contextmanager
def binary_cursor(conn: Connection) -> Iterator[psycopg.Cursor[Any]]:
    """psycopg's own cursor, in binary mode, on the connection ``conn`` holds.

    SQLAlchemy never sees this cursor's errors, so it would not learn that the
    server dropped the connection: then, as SQLAlchemy does on a disconnect,
    the connection is invalidated and the pool's other connections (likely
    dropped with it, as in a server restart) are replaced on their next checkout.
    One generator, the cursor closed by hand: every store's append goes through
    here, and each nested context manager cost it a few microseconds.
    """
    driver = _driver(conn)
    cursor = driver.cursor(binary=True)
    try:
        yield cursor
    except psycopg.Error as e:
        _invalidate_if_broken(conn, driver, e)
        raise
    finally:
        cursor.close()


@contextmanager
def _invalidated_if_broken(conn: Connection, driver: psycopg.Connection[Any]) -> Iterator[None]:
    try:
        yield
    except psycopg.Error as e:
        _invalidate_if_broken(conn, driver, e)
        raise


def _invalidate_if_broken(
    conn: Connection, driver: psycopg.Connection[Any], error: psycopg.Error
) -> None:
    if driver.broken:
        conn.invalidate(error)
        conn.engine.dispose(close=False)


def _first_fetch(conn: Connection, sql: str, params: dict[str, Any]) -> list[Sequence[Any]]:
    """A transaction's first statement, a read, sent in one simple query with the
    BEGIN it owes: one round trip for both.  A simple query takes no parameters,
    so psycopg binds them into the text (as its client-side cursors do) and its
    rows come back as text, loaded as fetch's binary ones are."""
    driver = conn.connection.driver_connection
    assert driver is not None  # a live pooled connection
    owed = _begin_with(conn, driver)
    with _invalidated_if_broken(conn, driver), psycopg.ClientCursor(driver) as cursor:
        query = owed + cursor.mogrify(sql, params).encode(driver.info.encoding)
        result = _exec_simple(driver, query)
        cursor.adapters.register_loader(_TIMESTAMP_OID, _UTCTimestampLoader)
        rows = Transformer(cursor)
        rows.set_pgresult(result)
        return rows.load_rows(0, result.ntuples, tuple)


def _compile(query: sa.ClauseElement, dialect: sa.Dialect) -> tuple[str, dict[str, Any]]:
    """The driver's SQL of ``query`` and the values of its constant parameters (a LIMIT 1)."""
    compiled = query.compile(dialect=dialect)
    return str(compiled), {k: v for k, v in compiled.params.items() if v is not None}


def _raise_translated_error(e: sa.exc.DBAPIError | psycopg.Error) -> None:
    """Raise the store's error for ``e``, one of SQLAlchemy's (which wraps the driver's)
    or the driver's own (from statements sent on its cursors directly), if it has one."""
    _raise_translated(e.orig if isinstance(e, sa.exc.DBAPIError) else e, e)


def _raise_translated(orig: BaseException | None, e: Exception) -> None:
    if isinstance(orig, psycopg.errors.UniqueViolation):
        constraint = orig.diag.constraint_name or ""
        if "event_id" in constraint:
            raise DuplicateEventError() from e
        raise ConflictError(f"conflicting write ({constraint})") from e
    if isinstance(orig, psycopg.errors.IntegrityError):
        raise ConflictError(f"conflicting write: {orig}") from e
    if isinstance(orig, _RETRYABLE):
        raise OperationalError(f"PostgreSQL could not complete it: {orig}") from e
