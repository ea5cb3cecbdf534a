"""The port every database backend implements: only what truly differs.

Each backend module (``sqlite``, ``postgres``) implements this once, with a
comment at each method saying why its dialect needs what it does.  The rest
of the log is written once against SQLAlchemy Core and this interface.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.dml import Insert

from eventstore.batch import Placement, SealedBatch
from eventstore.codec import WrappedKey
from eventstore.model import StreamRef
from eventstore.reader import RowTypes, StreamKey, load_stream_keys, select_event_columns
from eventstore.schema import data_keys, events, streams


@dataclass(frozen=True, slots=True)
class LatestStream:
    """A subject's latest stream generation, read without a lock: a guess to write against."""

    stream_id: int
    generation: int
    version: int
    chain_hash: bytes
    closed: bool
    wrapped_key: WrappedKey | None  # None once the data key is destroyed


def stream_key(latest: LatestStream, namespace: str, subject_key: bytes) -> StreamKey:
    """The reader's view of a subject's latest stream generation."""
    ref = StreamRef(latest.stream_id, namespace, subject_key, latest.generation)
    return StreamKey(ref, latest.wrapped_key)


@dataclass(frozen=True, slots=True)
class StreamRows:
    """A stream and rows of its events (columns as in ``EVENT_READ_COLUMNS``)."""

    stream: StreamKey
    rows: Iterable[Sequence[Any]]


@dataclass(frozen=True)
class LogRows:
    """Rows of one page of the log and the streams (with data keys) they belong to."""

    rows: Sequence[Sequence[Any]]
    streams: Mapping[int, StreamKey]


# Columns of :attr:`Backend.latest_stream_sql`, in this order.
_LATEST_STREAM = (
    sa.select(
        streams.c.stream_id,
        streams.c.generation,
        streams.c.version,
        streams.c.chain_hash,
        streams.c.closed_at.is_not(None),
        data_keys.c.dek_id,
        data_keys.c.kek_version,
        data_keys.c.wrapped_key,
    )
    .select_from(streams.outerjoin(data_keys, data_keys.c.stream_id == streams.c.stream_id))
    .where(
        streams.c.namespace == sa.bindparam("namespace"),
        streams.c.subject_key == sa.bindparam("subject_key"),
    )
    .order_by(streams.c.generation.desc())
    .limit(sa.bindparam("limit", 1, type_=sa.BigInteger()))
)


@dataclass(frozen=True)
class DriverSql:
    """SQL text for the driver's cursor, and the values SQLAlchemy bound as literals."""

    text: str
    defaults: Mapping[str, Any]


class Backend(abc.ABC):
    """Dialect-specific behaviour of the log."""

    name: str
    #: True when one process owns the database file (SQLite).
    embedded: bool

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @abc.abstractmethod
    def write_connection(self) -> AbstractContextManager[Connection]:
        """A connection whose transaction may write, begun so that writers serialise correctly."""

    @abc.abstractmethod
    def read_connection(self) -> AbstractContextManager[Connection]:
        """A connection for consistent reads that never blocks writers."""

    def statement_reads(self) -> AbstractContextManager[Connection]:
        """A connection for reads whose statements need no common snapshot.

        Each statement is consistent on its own; PostgreSQL runs them in
        autocommit, which saves the BEGIN and ROLLBACK round trips.
        """
        return self.read_connection()

    def log_reads(self, partitioned: bool) -> AbstractContextManager[Connection]:
        """A connection for one page of :attr:`read_log_sql` (and its streams' keys)."""
        return self.statement_reads()

    @abc.abstractmethod
    def insert_ignoring_duplicates(self, table: sa.Table) -> Insert:
        """``INSERT … ON CONFLICT DO NOTHING`` for ``table``."""

    @abc.abstractmethod
    def after_cursor(self) -> sa.ColumnElement[bool]:
        """Rows strictly after the cursor given as parameters ``group`` and ``position``.

        In a form the index serves.
        """

    #: The global order, as ORDER BY columns the index serves.
    log_order: tuple[sa.ColumnElement[Any], ...]

    @abc.abstractmethod
    def insert_events(self, conn: Connection, batch: SealedBatch) -> list[Placement] | None:
        """Move the stream head and insert the batch's rows, or do nothing.

        Writes only if the stream head is still at ``batch.old_version`` and
        the stream is open with its data key alive; returns the rows'
        placements in version order, or ``None`` (nothing written) otherwise.
        Runs inside the caller's transaction.
        """

    @abc.abstractmethod
    def append_committed(self, batch: SealedBatch) -> list[Placement] | None:
        """:meth:`insert_events` in a transaction of its own, committed when it returns.

        The optimistic append: no stream lock is taken first, the head
        condition of the write decides, so a racing writer, a closed
        generation or a destroyed key make it write nothing.
        """

    @abc.abstractmethod
    def create_stream_committed(
        self, seal: Callable[[int], SealedBatch], key: WrappedKey
    ) -> tuple[SealedBatch, list[Placement]] | None:
        """Create a subject's first stream generation with its data key and first events.

        ``seal`` seals the events once the new stream's id is known; its
        batch names the namespace, subject key and generation.  Commits
        before it returns; ``None`` (nothing written) when that generation
        exists already.
        """

    @functools.cached_property
    def latest_stream_sql(self) -> DriverSql:
        """The subject's latest stream generation and its data key, without a lock.

        Parameters ``namespace`` and ``subject_key``; columns as :class:`LatestStream`.
        """
        return self.driver_sql(_LATEST_STREAM)

    def peek_latest_stream(self, namespace: str, subject_key: bytes) -> LatestStream | None:
        """The subject's latest stream generation as of now, for the optimistic append.

        Only a guess: the append's write re-checks the head.
        """
        with self.statement_reads() as conn:
            return self._latest_stream(conn, namespace, subject_key)

    def _latest_stream(
        self, conn: Connection, namespace: str, subject_key: bytes
    ) -> LatestStream | None:
        params = {"namespace": namespace, "subject_key": subject_key}
        rows = self.fetch_all(conn, self.latest_stream_sql, params)
        if not rows:
            return None
        stream_id, generation, version, chain_hash, closed, dek_id, kek_version, wrapped = rows[0]
        key = (
            None
            if wrapped is None
            else WrappedKey(self.row_types.to_uuid(dek_id), kek_version, bytes(wrapped))
        )
        return LatestStream(stream_id, generation, version, bytes(chain_hash), bool(closed), key)

    def stream_keys(self, conn: Connection, stream_ids: Iterable[int]) -> Mapping[int, StreamKey]:
        """The streams of ``stream_ids`` and their data keys, in one statement."""
        return load_stream_keys(conn, stream_ids)

    def log_page(self, params: Mapping[str, Any], partitioned: bool) -> LogRows:
        """One page of :attr:`read_log_sql` and its streams' keys, the keys read after the rows.

        ``params``: ``group``, ``position``, ``limit`` (and ``index``, ``count``
        when ``partitioned``).  Reading the keys second means a key destroyed
        in between reads back as erased, never the other way round.
        """
        with self.log_reads(partitioned) as conn:
            rows = self.fetch_all(conn, self.read_log_sql[partitioned], params)
            return LogRows(rows, self.stream_keys(conn, {row[3] for row in rows}))

    @contextmanager
    def stream_read(
        self, namespace: str, subject_key: bytes, backwards: bool, params: Mapping[str, Any]
    ) -> Iterator[StreamRows | None]:
        """The subject's latest stream generation and the rows of :attr:`read_stream_sql`.

        ``params``: ``version`` and ``limit``.  ``None`` when the subject never
        wrote.  The rows are consumed inside the ``with`` block.
        """
        with self.statement_reads() as conn:
            latest = self._latest_stream(conn, namespace, subject_key)
            if latest is None:
                yield None
                return
            values = {**params, "stream_id": latest.stream_id}
            rows = self.fetch_all(conn, self.read_stream_sql[backwards], values)
            yield StreamRows(stream_key(latest, namespace, subject_key), rows)

    #: How this driver returns UUIDs and timestamps in raw rows.
    row_types: RowTypes
    #: What :attr:`read_stream_sql` and :attr:`read_log_sql` select: the
    #: columns of ``EVENT_READ_COLUMNS``, some perhaps in a form cheaper for
    #: the driver to load (which :attr:`row_types` then converts).
    raw_event_columns: sa.Select[Any] = select_event_columns
    #: The driver's paramstyle for named parameters.
    paramstyle: str

    def driver_sql(self, statement: sa.ClauseElement) -> DriverSql:
        """A statement built once with ``bindparam()``, compiled once to the driver's SQL."""
        dialect = type(self.engine.dialect)(paramstyle=self.paramstyle)  # type: ignore[call-arg]
        compiled = statement.compile(dialect=dialect)
        defaults = {k: v for k, v in compiled.params.items() if v is not None}
        return DriverSql(str(compiled), defaults)

    def fetch_all(
        self, conn: Connection, sql: DriverSql | str, params: Mapping[str, Any]
    ) -> list[Any]:
        """Rows of a query as the driver's tuples (no SQLAlchemy row processing)."""
        driver = conn.connection.driver_connection
        if isinstance(sql, DriverSql):
            return self._fetch(driver, sql.text, {**sql.defaults, **params})
        return self._fetch(driver, sql, params)

    def _fetch(self, driver: Any, sql: str, params: Mapping[str, Any]) -> list[Any]:
        cursor = driver.cursor()
        try:
            cursor.execute(sql, params)
            return list(cursor.fetchall())
        finally:
            cursor.close()

    @functools.cached_property
    def read_stream_sql(self) -> dict[bool, DriverSql]:
        """Events of one stream from a version, forwards (``False``) or backwards (``True``).

        Parameters: ``stream_id``, ``version``, ``limit``.
        """
        query = self.raw_event_columns.where(events.c.stream_id == sa.bindparam("stream_id"))
        limit = sa.bindparam("limit", type_=sa.BigInteger())
        version = sa.bindparam("version", type_=sa.BigInteger())
        forwards = query.where(events.c.version >= version).order_by(events.c.version)
        backwards = query.where(events.c.version <= version).order_by(events.c.version.desc())
        return {
            False: self.driver_sql(forwards.limit(limit)),
            True: self.driver_sql(backwards.limit(limit)),
        }

    @functools.cached_property
    def read_log_sql(self) -> dict[bool, DriverSql]:
        """One page of the log after a cursor, in global order: all, or one partition.

        Parameters: ``group``, ``position``, ``limit``; with the partition
        (``True``) also ``count`` and ``index``: streams whose id modulo
        ``count`` equals ``index``.
        """
        query = self.raw_event_columns.where(
            self.after_cursor(), self.visible_commit_groups(events.c.commit_group)
        )
        limit = sa.bindparam("limit", type_=sa.BigInteger())
        partition = events.c.stream_id % sa.bindparam("count") == sa.bindparam("index")
        return {
            False: self.driver_sql(query.order_by(*self.log_order).limit(limit)),
            True: self.driver_sql(query.where(partition).order_by(*self.log_order).limit(limit)),
        }

    @abc.abstractmethod
    def visible_commit_groups(self, column: sa.ColumnElement[int]) -> sa.ColumnElement[bool]:
        """Rows a reader may deliver now without risking a later commit landing before them."""

    @abc.abstractmethod
    def translate_errors(self) -> AbstractContextManager[None]:
        """Re-raise driver errors as the log's error tree (``raise … from e``)."""

    def dispose(self) -> None:
        self.engine.dispose()


def head_params(batch: SealedBatch) -> dict[str, Any]:
    """Parameters of the conditional head move: from ``old_version`` to the batch's end."""
    return {
        "stream_id": batch.stream.stream_id,
        "old_version": batch.old_version,
        "new_version": batch.new_version,
        "chain_hash": batch.chain_hash,
    }
