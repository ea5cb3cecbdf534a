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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.errors
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.dml import Insert

from eventstore.backend import Backend, _move_head, head_params, single_row_params
from eventstore.errors import ConflictError, DuplicateEventError, OperationalError
from eventstore.model import LogCursor
from eventstore.schema import streams

# Driver errors that mean "try again": lost connections, serialisation
# failures, deadlocks, lock timeouts.
_RETRYABLE = (
    psycopg.OperationalError,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
)


def normalise_postgres_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` and select the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url.split('://')[0]}://…")


def create_postgres_engine(url: str, pool_size: int = 5) -> Engine:
    # No pre-ping: it would cost a round trip per checkout.  A connection
    # that died with the server fails its statement with OperationalError
    # (retryable) and SQLAlchemy discards the stale pool.
    return sa.create_engine(
        normalise_postgres_url(url), pool_size=pool_size, max_overflow=10, pool_recycle=1800
    )


class PostgresBackend(Backend):
    name = "postgresql"
    embedded = False

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
    def statement_connection(self) -> Iterator[Connection]:
        # Autocommit: a lone statement needs no transaction around it, and
        # without one psycopg sends no BEGIN and the pool no ROLLBACK, one round
        # trip instead of three.
        with self.read_connection() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")

    def insert_ignoring_duplicates(self, table: sa.Table) -> Insert:
        return pg_insert(table).on_conflict_do_nothing()

    def commit_group(self) -> sa.ColumnElement[int]:
        # xid8 has no cast to bigint; its text form is the decimal number.
        return sa.literal_column("pg_current_xact_id()::text::bigint", sa.BigInteger)

    def after_cursor(
        self, group: sa.ColumnElement[int], position: sa.ColumnElement[int], cursor: LogCursor
    ) -> sa.ColumnElement[bool]:
        # PostgreSQL serves a row-value comparison from the (group, position) index.
        return sa.tuple_(group, position) > sa.tuple_(
            sa.literal(cursor.commit_group), sa.literal(cursor.position)
        )

    def insert_events(
        self,
        conn: Connection,
        rows: Sequence[dict[str, Any]],
        stream_id: int,
        old_version: int,
        chain_hash: bytes,
    ) -> list[sa.Row[Any]]:
        # The common single-event append in one round trip: the head moves in a
        # data-modifying CTE beside the insert.  Batches use the executemany path.
        if len(rows) != 1:
            return super().insert_events(conn, rows, stream_id, old_version, chain_hash)
        params = single_row_params(rows[0]) | head_params(stream_id, old_version, 1, chain_hash)
        result: list[sa.Row[Any]] = list(conn.execute(self._append_one, params))
        if not result or result[0].moved != 1:
            raise OperationalError("stream head moved during the append; retry")
        return result

    @functools.cached_property
    def _append_one(self) -> sa.Select[Any]:
        head = _move_head.returning(streams.c.stream_id).cte("head")
        inserted = self.single_insert.cte("inserted")
        moved = sa.select(sa.func.count()).select_from(head).scalar_subquery()
        return sa.select(
            inserted.c.position, inserted.c.commit_group, moved.label("moved")
        ).add_cte(head)

    def visible_commit_groups(self, column: sa.ColumnElement[int]) -> sa.ColumnElement[bool]:
        horizon = sa.literal_column(
            "pg_snapshot_xmin(pg_current_snapshot())::text::bigint", sa.BigInteger
        )
        return column < horizon

    @contextmanager
    def translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sa.exc.DBAPIError as e:
            orig = e.orig
            if isinstance(orig, psycopg.errors.UniqueViolation):
                constraint = orig.diag.constraint_name or ""
                if "event_id" in constraint:
                    raise DuplicateEventError() from e
                raise ConflictError(f"conflicting write ({constraint})") from e
            if isinstance(orig, psycopg.errors.IntegrityError):
                raise ConflictError(f"conflicting write: {orig}") from e
            if isinstance(orig, _RETRYABLE):
                raise OperationalError(f"PostgreSQL could not complete it: {orig}") from e
            raise
