"""PostgreSQL through psycopg 3: many API and worker processes share one server.

The global order.  Positions come from a sequence, and sequence values are
handed out when rows are inserted, not when transactions commit: a writer can
take position 7, stay open, and commit after position 8 was committed and
already delivered to a subscriber, which would then skip 7 for ever.  The
common cure, a table lock around every append, serialises all writers.

Instead each row records the id of the transaction that wrote it
(``pg_current_xact_id()``, a 64-bit xid8 that never wraps) and the log is
ordered by ``(commit_group, position)``.  A reader only delivers rows whose
transaction id is below ``pg_snapshot_xmin(pg_current_snapshot())``: the
oldest transaction still running.  Every transaction below that horizon has
finished, so no row can ever appear behind a delivered one, and writers never
wait for each other except on the same stream.  The price is liveness, not
safety: a long-running transaction anywhere in the cluster holds delivery
back until it ends.
"""

from __future__ import annotations

import functools
import struct
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import psycopg.errors
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.engine import Connection, Dialect, Engine
from sqlalchemy.sql.dml import Insert

from eventstore import postgres_arrays as arrays
from eventstore import postgres_prepared as prepared
from eventstore.backend import (
    Backend,
    DriverSql,
    LatestStream,
    LogRows,
    StreamRows,
    head_params,
    stream_key,
)
from eventstore.batch import Placement, SealedBatch
from eventstore.codec import WrappedKey
from eventstore.companions import bound_row
from eventstore.errors import ConflictError, DuplicateEventError, OperationalError
from eventstore.postgres_autocommit import AutocommitConnections
from eventstore.reader import (
    EVENT_READ_COLUMNS,
    RowTypes,
    StreamKey,
    stream_key_from_row,
    streams_with_keys,
    unchanged,
)
from eventstore.schema import events, streams

# Driver errors that mean "try again": lost connections, serialisation
# failures, deadlocks, lock timeouts.
_RETRYABLE = (
    psycopg.OperationalError,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
)


# The append, in one statement.  The head moves only if it is still where
# the writer saw it, and only for an open generation whose data key lives:
# under READ COMMITTED a concurrent update of the row makes PostgreSQL wait
# for it and re-check these conditions on the new row version, so a racing
# append, a close or a key destruction (which stamps ``key_destroyed_at`` on
# the stream row) makes this write nothing.  The rows are inserted only from
# the moved head, in version order, so their positions rise with versions.
_MOVE_HEAD = """
WITH head AS (
    UPDATE streams SET version = %(new_version)s, chain_hash = %(chain_hash)b
    WHERE stream_id = %(stream_id)s AND version = %(old_version)s
      AND closed_at IS NULL AND key_destroyed_at IS NULL
    RETURNING stream_id
)"""
# A subject's first generation, created with its data key and first events.
# ON CONFLICT DO NOTHING: when another writer created the generation first,
# nothing is written and the append takes the locked path.  The data key's
# foreign key is checked at the end of the statement, when the stream row
# exists.  The events have none on PostgreSQL (see eventstore.schema): they
# are inserted only FROM the stream row the statement has just written.
_NEW_STREAM = """
WITH head AS (
    INSERT INTO streams (stream_id, namespace, subject_key, generation, version, chain_hash,
                         created_at)
    VALUES (%(stream_id)s, %(namespace)s, %(subject_key)b, %(generation)s, %(new_version)s,
            %(chain_hash)b, %(recorded_at)s)
    ON CONFLICT DO NOTHING
    RETURNING stream_id
), new_key AS (
    INSERT INTO data_keys (dek_id, stream_id, kek_version, wrapped_key, created_at)
    SELECT %(dek_id)s, stream_id, %(kek_version)s, %(wrapped_key)b, %(recorded_at)s FROM head
)"""
_INSERT_COLUMNS = """
INSERT INTO events (commit_group, event_id, stream_id, version, type, schema_version,
                    recorded_at, payload, digest, chain_hash)"""
_INSERT_FROM_HEAD = (
    _INSERT_COLUMNS
    + """
SELECT pg_current_xact_id()::text::bigint, e.event_id, head.stream_id, e.version, e.type,
       e.schema_version, %(recorded_at)s, e.payload, e.digest, e.chain_hash
FROM head, unnest(%(event_ids)b::uuid[], %(versions)b::bigint[], %(types)b::text[],
                  %(schema_versions)b::int[], %(payloads)b::bytea[], %(digests)b::bytea[],
                  %(chain_hashes)b::bytea[])
     AS e(event_id, version, type, schema_version, payload, digest, chain_hash)
ORDER BY e.version
RETURNING position, commit_group, version
"""
)
# One event, the common case, with scalar parameters: psycopg dumps the seven
# arrays above in Python, which cost about a sixth of a single append.  The
# event is the head's new version and its chain hash is the head's new hash,
# so it reuses those parameters.
_INSERT_ONE_FROM_HEAD = (
    _INSERT_COLUMNS
    + """
SELECT pg_current_xact_id()::text::bigint, %(event_id)b, head.stream_id, %(new_version)s,
       %(type)s, %(schema_version)s, %(recorded_at)s, %(payload)b, %(digest)b, %(chain_hash)b
FROM head
RETURNING position, commit_group, version
"""
)
# Companion rows (eventstore.companions) ride in the same statement: one
# more data-modifying CTE per row, ``INSERT … SELECT <values> FROM head``, so
# they land exactly when the head moved.  All CTEs of a statement run to
# completion whether or not the main query reads them, and the statement is
# atomic.  The values go uncast: INSERT … SELECT resolves untyped parameters
# (text, NULL) to the target columns' types, and an over-long string fails
# as it would in a plain INSERT instead of being cut by a cast.
_COMPANION_PREFIX = "c{index}_"
_PYFORMAT_PARAMETERS = PGDialect_psycopg(paramstyle="pyformat")  # type: ignore[no-untyped-call]
_NEXT_STREAM_ID = "SELECT nextval(pg_get_serial_sequence('streams', 'stream_id'))"


@functools.cache
def _statement(head: str, shape: tuple[tuple[sa.Table, int], ...], single: bool) -> str:
    """The append after ``head`` with companion CTEs for ``shape``: (table, rows) pairs.

    ``single``: the statement for a batch of exactly one event.

    Built once per shape; psycopg then prepares the statement on the server.
    """
    ctes = []
    for index, table in enumerate(t for t, count in shape for _ in range(count)):
        prefix = _COMPANION_PREFIX.format(index=index)
        row: list[sa.BindParameter[Any]] = [sa.bindparam(prefix + c.name) for c in table.c]
        values = sa.select(*row).select_from(sa.table("head"))
        insert = table.insert().from_select(list(table.c), values)
        compiled = insert.compile(dialect=_PYFORMAT_PARAMETERS)
        ctes.append(f",\nc{index} AS (\n{compiled}\n)")
    return head + "".join(ctes) + (_INSERT_ONE_FROM_HEAD if single else _INSERT_FROM_HEAD)


def _sql(head: str, batch: SealedBatch) -> str:
    shape = tuple((c.table, len(c.rows)) for c in batch.companions)
    return _statement(head, shape, len(batch.events) == 1)


def _companion_params(batch: SealedBatch, dialect: Dialect) -> dict[str, Any]:
    """The values of every companion row, named as :func:`_statement` numbers them."""
    params: dict[str, Any] = {}
    rows = ((c.table, row) for c in batch.companions for row in c.rows)
    for index, (table, row) in enumerate(rows):
        params |= bound_row(table, row, dialect, _COMPANION_PREFIX.format(index=index))
    return params


def _create_params(batch: SealedBatch, key: WrappedKey, dialect: Dialect) -> dict[str, Any]:
    return _append_params(batch, dialect) | {
        "namespace": batch.stream.namespace,
        "subject_key": batch.stream.subject_key,
        "generation": batch.stream.generation,
        "dek_id": key.dek_id,
        "kek_version": key.kek_version,
        "wrapped_key": key.wrapped,
    }


def _append_params(batch: SealedBatch, dialect: Dialect) -> dict[str, Any]:
    params = _companion_params(batch, dialect) | head_params(batch)
    # The column holds naive UTC, as SQLAlchemy's UTCDateTime writes it.
    params["recorded_at"] = batch.recorded_at.astimezone(UTC).replace(tzinfo=None)
    if len(batch.events) == 1:
        return params | _one_event_params(batch)
    return params | {
        "event_ids": arrays.uuid_array([e.event_id for e in batch.events]),
        "versions": arrays.bigint_array(batch.versions),
        "types": arrays.text_array([e.type for e in batch.events]),
        "schema_versions": arrays.int_array([e.schema_version for e in batch.events]),
        "payloads": arrays.bytea_array(batch.ciphertexts),
        "digests": arrays.bytea_array(batch.digests),
        "chain_hashes": arrays.bytea_array(batch.chain_hashes),
    }


def _one_event_params(batch: SealedBatch) -> dict[str, Any]:
    """The parameters of :data:`_INSERT_ONE_FROM_HEAD` beyond the head's."""
    [event] = batch.events
    return {
        "event_id": event.event_id,
        "type": event.type,
        "schema_version": event.schema_version,
        "payload": batch.ciphertexts[0],
        "digest": batch.digests[0],
    }


# The statements above without companion rows run through libpq directly
# (eventstore.postgres_prepared), their parameters encoded here in binary.
_PARAMETER_TYPES = {
    "stream_id": "int8",
    "old_version": "int8",
    "new_version": "int8",
    "chain_hash": "bytea",
    "recorded_at": "timestamp",
    "event_id": "uuid",
    "type": "text",
    "schema_version": "int4",
    "payload": "bytea",
    "digest": "bytea",
    "event_ids": "uuid[]",
    "versions": "int8[]",
    "types": "text[]",
    "schema_versions": "int4[]",
    "payloads": "bytea[]",
    "digests": "bytea[]",
    "chain_hashes": "bytea[]",
    "namespace": "text",
    "subject_key": "bytea",
    "generation": "int4",
    "dek_id": "uuid",
    "kek_version": "int4",
    "wrapped_key": "bytea",
}
_PREPARED_NEXT_STREAM_ID = prepared.statement(_NEXT_STREAM_ID, {})


@functools.cache
def _prepared_statement(head: str, single: bool) -> prepared.Statement:
    return prepared.statement(_statement(head, (), single), _PARAMETER_TYPES)


def _append_values(batch: SealedBatch) -> dict[str, bytes]:
    """:func:`_append_params` of a batch without companion rows, encoded in binary."""
    values = {
        "stream_id": prepared.int8(batch.stream.stream_id),
        "old_version": prepared.int8(batch.old_version),
        "new_version": prepared.int8(batch.new_version),
        "chain_hash": batch.chain_hash,
        "recorded_at": prepared.timestamp(batch.recorded_at),
    }
    events = batch.events
    if len(events) == 1:
        [event] = events
        values["event_id"] = event.event_id.bytes
        values["type"] = event.type.encode()
        values["schema_version"] = prepared.int4(event.schema_version)
        values["payload"] = batch.ciphertexts[0]
        values["digest"] = batch.digests[0]
        return values
    values["event_ids"] = arrays.uuid_array([e.event_id for e in events]).data
    values["versions"] = arrays.bigint_array(batch.versions).data
    values["types"] = arrays.text_array([e.type for e in events]).data
    values["schema_versions"] = arrays.int_array([e.schema_version for e in events]).data
    values["payloads"] = arrays.bytea_array(batch.ciphertexts).data
    values["digests"] = arrays.bytea_array(batch.digests).data
    values["chain_hashes"] = arrays.bytea_array(batch.chain_hashes).data
    return values


def _create_values(batch: SealedBatch, key: WrappedKey) -> dict[str, bytes]:
    """:func:`_create_params` of a batch without companion rows, encoded in binary."""
    return _append_values(batch) | {
        "namespace": batch.stream.namespace.encode(),
        "subject_key": batch.stream.subject_key,
        "generation": prepared.int4(batch.stream.generation),
        "dek_id": key.dek_id.bytes,
        "kek_version": prepared.int4(key.kek_version),
        "wrapped_key": key.wrapped,
    }


# The parameters of Backend.latest_stream_sql, and its columns in binary.
_PEEK_PARAMETER_TYPES = {"namespace": "text", "subject_key": "bytea", "limit": "int8"}
_INT4 = struct.Struct(">i")
_INT8 = struct.Struct(">q")


def _latest_stream(row: list[bytes | None]) -> LatestStream:
    stream_id, generation, version, chain_hash, closed, dek_id, kek_version, wrapped = row
    key = None
    if wrapped is not None:  # the key row's columns are NULL together (outer join)
        key = WrappedKey(uuid.UUID(bytes=_set(dek_id)), _INT4.unpack(_set(kek_version))[0], wrapped)
    return LatestStream(
        _INT8.unpack(_set(stream_id))[0],
        _INT4.unpack(_set(generation))[0],
        _INT8.unpack(_set(version))[0],
        _set(chain_hash),
        _set(closed) != b"\x00",
        key,
    )


def _set(value: bytes | None) -> bytes:
    """A value of a NOT NULL column (or of a joined row that exists)."""
    if value is None:
        raise OperationalError("PostgreSQL returned NULL for a column that has none")
    return value


def _placements(rows: list[Any]) -> list[Placement]:
    """``(position, commit_group)`` of RETURNING rows, in version order."""
    return [(position, group) for position, group, _ in sorted(rows, key=lambda r: r[2])]


def normalise_postgres_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` and select the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url.split('://')[0]}://…")


# The one-statement appends' and stream reads' own connections (eventstore.postgres_autocommit),
# beside the engine's pool of 5 plus 10 overflow: docs/operations.md counts both.
_IDLE_AUTOCOMMIT_CONNECTIONS = 5
_OPEN_AUTOCOMMIT_CONNECTIONS = 10
_RECYCLE_SECONDS = 1800
# Rows per chunk of a stream read: small enough that decoding starts soon
# after the server starts sending, large enough that a chunk's fixed cost
# (one result, one wait) stays small.  100 did best of 50, 100 and 250 on a
# 1,000-event stream, within this machine's noise of the others.
_READ_CHUNK_ROWS = 100

# Raw reads take the recorded time as PostgreSQL's own binary form (8 bytes,
# microseconds since 2000-01-01) instead of a timestamp psycopg turns into a
# datetime for every row: the events of one append share their time, and the
# decoder converts a time only when it differs from the row before's.  That
# datetime per row was 2-3% of a read's client instructions.
_RAW_EVENT_COLUMNS = sa.select(
    *(
        sa.func.timestamp_send(events.c.recorded_at, type_=sa.LargeBinary()).label(name)
        if name == "recorded_at"
        else events.c[name]
        for name in EVENT_READ_COLUMNS
    )
)
_PG_EPOCH_UTC = datetime(2000, 1, 1, tzinfo=UTC)


def _utc_from_timestamp_send(raw: bytes) -> datetime:
    return _PG_EPOCH_UTC + timedelta(microseconds=int.from_bytes(raw, "big", signed=True))


def create_postgres_engine(url: str, pool_size: int = 5) -> Engine:
    # No pre-ping: it would cost a round trip per checkout.  A connection
    # that died with the server fails its statement with OperationalError
    # (retryable) and SQLAlchemy discards the stale pool.
    return sa.create_engine(
        normalise_postgres_url(url),
        pool_size=pool_size,
        max_overflow=10,
        pool_recycle=_RECYCLE_SECONDS,
    )


class PostgresBackend(Backend):
    name = "postgresql"
    embedded = False
    paramstyle = "pyformat"
    log_order = (events.c.commit_group, events.c.position)
    row_types = RowTypes(unchanged, _utc_from_timestamp_send)
    raw_event_columns = _RAW_EVENT_COLUMNS

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        # The optimistic append's connections: the engine's server and
        # account, kept in autocommit (eventstore.postgres_autocommit).
        cargs, cparams = engine.dialect.create_connect_args(engine.url)
        self._autocommit_connections = AutocommitConnections(
            functools.partial(psycopg.connect, *cargs, autocommit=True, **cparams),
            keep=_IDLE_AUTOCOMMIT_CONNECTIONS,
            limit=_OPEN_AUTOCOMMIT_CONNECTIONS,
            recycle_after=_RECYCLE_SECONDS,
        )
        self._prepared = prepared.PreparedStatements()

    @contextmanager
    def write_connection(self) -> Iterator[Connection]:
        # READ COMMITTED is enough: appends lock their stream row FOR UPDATE,
        # and uniqueness constraints back up every invariant.
        with self.translate_errors(), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def read_connection(self) -> Iterator[Connection]:
        with self.translate_errors(), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def statement_reads(self) -> Iterator[Connection]:
        with self.read_connection() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")

    @contextmanager
    def log_reads(self, partitioned: bool) -> Iterator[Connection]:
        if not partitioned:
            with self.statement_reads() as conn:
                yield conn
            return
        # The planner has no statistics for ``stream_id % count`` and guesses
        # that 0.5% of the rows match, so it prefers fetching the whole rest of
        # the log through a bitmap scan and sorting it over walking the
        # (commit_group, position) index until the page is full: every page
        # then costs as much as the whole remaining log.  Walking the index in
        # order is always right for a page, so sorting is ruled out for this
        # transaction only.
        with self.read_connection() as conn, conn.begin():
            conn.exec_driver_sql("SET LOCAL enable_sort = off")
            yield conn

    @functools.cached_property
    def _stream_keys_sql(self) -> DriverSql:
        ids = sa.bindparam("stream_ids", type_=postgresql.ARRAY(sa.BigInteger()))
        return self.driver_sql(streams_with_keys.where(streams.c.stream_id == sa.any_(ids)))

    def stream_keys(self, conn: Connection, stream_ids: Iterable[int]) -> Mapping[int, StreamKey]:
        # One array parameter instead of SQLAlchemy's expanding IN list: the
        # statement text stays the same for every page, so it is compiled
        # once and psycopg prepares it on the server.  The expanding list
        # took about a tenth of a page of the log.
        rows = self.fetch_all(conn, self._stream_keys_sql, {"stream_ids": sorted(set(stream_ids))})
        return {row[0]: stream_key_from_row(row) for row in rows}

    def log_page(self, params: Mapping[str, Any], partitioned: bool) -> LogRows:
        if partitioned:  # needs its transaction (see log_reads)
            return super().log_page(params, partitioned)
        # On an autocommit connection of the appends' pool, both statements
        # prepared and run through libpq as the appends' are, their rows loaded
        # by psycopg's own loaders.  An engine connection switched to
        # autocommit and back, and psycopg's execute path, were most of a
        # page's fixed client time: a one-event page took 0.355 ms of client
        # CPU that way and takes 0.154 now.
        page = {name: prepared.int8(params[name]) for name in ("group", "position", "limit")}
        with self.translate_errors(), self._autocommit_connections.connection() as driver:
            result = self._prepared.execute(driver, self._log_page_statement, page)
            rows = prepared.tuple_rows(driver, result)
            if not rows:  # a follower polling the end of the log: one round trip
                return LogRows(rows, {})
            stream_ids = arrays.bigint_array(sorted({row[3] for row in rows})).data
            result = self._prepared.execute(
                driver, self._stream_keys_statement, {"stream_ids": stream_ids}
            )
            key_rows = prepared.tuple_rows(driver, result)
        return LogRows(rows, {row[0]: stream_key_from_row(row) for row in key_rows})

    @functools.cached_property
    def _log_page_statement(self) -> prepared.Statement:
        types = {"group": "int8", "position": "int8", "limit": "int8"}
        return prepared.statement(self.read_log_sql[False].text, types)

    @functools.cached_property
    def _stream_keys_statement(self) -> prepared.Statement:
        return prepared.statement(self._stream_keys_sql.text, {"stream_ids": "int8[]"})

    def insert_ignoring_duplicates(self, table: sa.Table) -> Insert:
        return pg_insert(table).on_conflict_do_nothing()

    def after_cursor(self) -> sa.ColumnElement[bool]:
        # PostgreSQL serves a row-value comparison from the (group, position) index.
        return sa.tuple_(events.c.commit_group, events.c.position) > sa.tuple_(
            sa.bindparam("group", type_=sa.BigInteger()),
            sa.bindparam("position", type_=sa.BigInteger()),
        )

    def _fetch(
        self, driver: psycopg.Connection[Any], sql: str, params: Mapping[str, Any]
    ) -> list[Any]:
        # Binary results: bytea arrives as bytes instead of hex text to decode.
        with driver.cursor(binary=True) as cursor:
            cursor.execute(sql.encode(), params)
            return cursor.fetchall()

    def insert_events(self, conn: Connection, batch: SealedBatch) -> list[Placement] | None:
        params = _append_params(batch, self.engine.dialect)
        rows = self.fetch_all(conn, _sql(_MOVE_HEAD, batch), params)
        return _placements(rows) if rows else None

    def append_committed(self, batch: SealedBatch) -> list[Placement] | None:
        # Autocommit: psycopg sends the one statement and PostgreSQL commits
        # it on its own, so an append is a single round trip (no BEGIN, no
        # COMMIT).  The statement is atomic: the head moves and the rows land
        # together or not at all.
        with self.translate_errors(), self._autocommit_connections.connection() as driver:
            rows = self._write(driver, _MOVE_HEAD, batch, None)
        return _placements(rows) if rows else None

    @functools.cached_property
    def _latest_stream_statement(self) -> prepared.Statement:
        return prepared.statement(self.latest_stream_sql.text, _PEEK_PARAMETER_TYPES)

    def peek_latest_stream(self, namespace: str, subject_key: bytes) -> LatestStream | None:
        # Through libpq on the autocommit connections, like the append that
        # follows: the same read through SQLAlchemy's pool cost about as much
        # client time as the append itself.
        with self.translate_errors(), self._autocommit_connections.connection() as driver:
            return self._peek(driver, namespace, subject_key)

    def _peek(
        self, driver: psycopg.Connection[Any], namespace: str, subject_key: bytes
    ) -> LatestStream | None:
        values = {
            "namespace": namespace.encode(),
            "subject_key": subject_key,
            "limit": prepared.int8(1),
        }
        result = self._prepared.execute(driver, self._latest_stream_statement, values)
        if result.ntuples == 0:
            return None
        return _latest_stream([result.get_value(0, col) for col in range(result.nfields)])

    @contextmanager
    def stream_read(
        self, namespace: str, subject_key: bytes, backwards: bool, params: Mapping[str, Any]
    ) -> Iterator[StreamRows | None]:
        # On an autocommit connection, the stream found as the append finds
        # it, then its events in chunks of rows (libpq's chunked mode): the
        # reader decrypts the first chunk while the server still sends the
        # rest, instead of waiting for the whole result.  The two statements
        # see two snapshots, as the two statements of the generic read do.
        with self.translate_errors(), self._autocommit_connections.connection() as driver:
            latest = self._peek(driver, namespace, subject_key)
            if latest is None:
                yield None
                return
            sql = self.read_stream_sql[backwards]
            values = {**sql.defaults, **params, "stream_id": latest.stream_id}
            with driver.cursor(binary=True) as cursor:
                rows = cursor.stream(sql.text.encode(), values, binary=True, size=_READ_CHUNK_ROWS)
                try:
                    yield StreamRows(stream_key(latest, namespace, subject_key), rows)
                finally:
                    # A read that stopped early (an error while decoding):
                    # closing the generator cancels the query and drains what
                    # arrived, so the connection goes back reusable (the pool
                    # closes one still in the middle of a result).
                    rows.close()  # type: ignore[attr-defined]

    def create_stream_committed(
        self, seal: Callable[[int], SealedBatch], key: WrappedKey
    ) -> tuple[SealedBatch, list[Placement]] | None:
        # Two round trips: the stream id (the ciphertexts are bound to it),
        # then one autocommitted statement writing stream, key and events.
        with self.translate_errors(), self._autocommit_connections.connection() as driver:
            result = self._prepared.execute(driver, _PREPARED_NEXT_STREAM_ID, {})
            batch = seal(prepared.int8_rows(result)[0][0])
            rows = self._write(driver, _NEW_STREAM, batch, key)
        return (batch, _placements(rows)) if rows else None

    def _write(
        self,
        driver: psycopg.Connection[Any],
        head: str,
        batch: SealedBatch,
        key: WrappedKey | None,
    ) -> list[Any]:
        """The append after ``head`` (creating the stream with ``key``); its RETURNING rows.

        Without companion rows the statement is one of a few fixed ones, run
        through libpq with parameters encoded here; companion rows bring
        columns of any table and type, which psycopg's adapters dump.
        """
        dialect = self.engine.dialect
        if batch.companions:
            if key is None:
                params = _append_params(batch, dialect)
            else:
                params = _create_params(batch, key, dialect)
            return self._fetch(driver, _sql(head, batch), params)
        values = _append_values(batch) if key is None else _create_values(batch, key)
        stmt = _prepared_statement(head, len(batch.events) == 1)
        return prepared.int8_rows(self._prepared.execute(driver, stmt, values))

    def dispose(self) -> None:
        self._autocommit_connections.close()
        super().dispose()

    def visible_commit_groups(self, column: sa.ColumnElement[int]) -> sa.ColumnElement[bool]:
        horizon = sa.literal_column(
            "pg_snapshot_xmin(pg_current_snapshot())::text::bigint", sa.BigInteger
        )
        return column < horizon

    @contextmanager
    def translate_errors(self) -> Iterator[None]:
        # Driver errors arrive wrapped by SQLAlchemy, or bare from the hot
        # paths that use the driver's cursor directly.
        try:
            yield
        except sa.exc.DBAPIError as e:
            _raise_translated(e.orig, e)
            raise
        except psycopg.Error as e:
            _raise_translated(e, e)
            raise


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
