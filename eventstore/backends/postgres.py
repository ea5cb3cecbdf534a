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

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC

import psycopg
import psycopg.errors
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from eventstore.backends.port import Backend, head_params
from eventstore.batch import Placement, SealedBatch
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

# The append, in one statement (one round trip).  The head moves only if it
# is still where the writer saw it, and only for an open generation whose
# data key lives; the rows are inserted only FROM the moved head, in version
# order, so their positions rise with versions.  The writer holds the stream
# row's lock, so the condition holds; it is the same rule as SQLite's, and a
# second guard against a close or key destruction (which stamps
# ``key_destroyed_at`` on the stream row).  The events have no foreign key on
# PostgreSQL (see eventstore.schema): they only ever come FROM the stream row.
_APPEND = """
WITH head AS (
    UPDATE streams SET version = %(new_version)s, chain_hash = %(chain_hash)s
    WHERE stream_id = %(stream_id)s AND version = %(old_version)s
      AND closed_at IS NULL AND key_destroyed_at IS NULL
    RETURNING stream_id
)
INSERT INTO events (commit_group, event_id, stream_id, version, type, schema_version,
                    recorded_at, payload, digest, chain_hash)
SELECT pg_current_xact_id()::text::bigint, e.event_id, head.stream_id, e.version, e.type,
       e.schema_version, %(recorded_at)s, e.payload, e.digest, e.chain_hash
FROM head, unnest(%(event_ids)s::uuid[], %(versions)s::bigint[], %(types)s::text[],
                  %(schema_versions)s::int[], %(payloads)s::bytea[], %(digests)s::bytea[],
                  %(chain_hashes)s::bytea[])
     AS e(event_id, version, type, schema_version, payload, digest, chain_hash)
ORDER BY e.version
RETURNING position, commit_group, version
"""

# Each of the two engines' pools (SQLAlchemy's QueuePool), counted in docs/operations.md.
POOL_SIZE = 5
MAX_OVERFLOW = 10
_RECYCLE_SECONDS = 1800


def normalise_postgres_url(url: str) -> str:
    """Accept ``postgresql://`` and ``postgres://`` and select the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    raise ValueError(f"not a PostgreSQL URL: {url.split('://')[0]}://…")


def _engine(url: str, **options: str) -> sa.Engine:
    # No pre-ping: it would cost a round trip per checkout.  A connection
    # that died with the server fails its statement with OperationalError
    # (retryable) and SQLAlchemy discards the stale pool.
    return sa.create_engine(
        normalise_postgres_url(url),
        pool_size=POOL_SIZE,
        max_overflow=MAX_OVERFLOW,
        pool_recycle=_RECYCLE_SECONDS,
        **options,
    )


_DURABLE_OPTION = "oblivio_durable"


def _begin(conn: Connection) -> None:
    # A commit that need not be durable does not wait for the WAL flush; the
    # server stays consistent after a crash (it may lose the last such commits,
    # never a part of one), and the setting ends with the transaction.
    if not conn.get_execution_options().get(_DURABLE_OPTION, True):
        conn.exec_driver_sql("SET LOCAL synchronous_commit = off")


class PostgresBackend(Backend):
    name = "postgresql"
    embedded = False
    log_order = (events.c.commit_group, events.c.position)

    def __init__(self, url: str) -> None:
        super().__init__(_engine(url))
        sa.event.listen(self.engine, "begin", _begin)
        # A pool of its own whose connections stay in autocommit: a statement
        # read sends no BEGIN or ROLLBACK.  Lending the main pool's connections
        # in autocommit instead (execution_options) switched them on every
        # checkout and return, and made a 200-event stream read about twice as
        # slow as this.
        self._autocommit = _engine(url, isolation_level="AUTOCOMMIT")

    @contextmanager
    def write_connection(self, *, durable: bool = True) -> Iterator[Connection]:
        # READ COMMITTED is enough: appends lock their stream row FOR UPDATE,
        # and uniqueness constraints back up every invariant.
        with self.translate_errors(), self.engine.connect() as conn:
            yield conn if durable else conn.execution_options(**{_DURABLE_OPTION: False})

    @contextmanager
    def read_connection(self) -> Iterator[Connection]:
        with self.translate_errors(), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def statement_reads(self, *, log_partition: bool = False) -> Iterator[Connection]:
        if not log_partition:
            with self.translate_errors(), self._autocommit.connect() as conn:
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

    def insert_unless_present(self, table: sa.Table) -> Insert:
        return pg_insert(table).on_conflict_do_nothing()

    def after_cursor(self) -> sa.ColumnElement[bool]:
        # A row-value comparison, which the (group, position) index serves,
        # and only commit groups below the oldest transaction still running
        # (see the module's docstring).
        after = sa.tuple_(events.c.commit_group, events.c.position) > sa.tuple_(
            sa.bindparam("group", type_=sa.BigInteger()),
            sa.bindparam("position", type_=sa.BigInteger()),
        )
        horizon = sa.literal_column(
            "pg_snapshot_xmin(pg_current_snapshot())::text::bigint", sa.BigInteger
        )
        return sa.and_(after, events.c.commit_group < horizon)

    def append(self, conn: Connection, batch: SealedBatch) -> list[Placement] | None:
        params = head_params(batch) | {
            # The column holds naive UTC, as SQLAlchemy's UTCDateTime writes it.
            "recorded_at": batch.recorded_at.astimezone(UTC).replace(tzinfo=None),
            "event_ids": [e.event_id for e in batch.events],
            "versions": list(batch.versions),
            "types": [e.type for e in batch.events],
            "schema_versions": [e.schema_version for e in batch.events],
            "payloads": batch.ciphertexts,
            "digests": batch.digests,
            "chain_hashes": batch.chain_hashes,
        }
        rows = conn.exec_driver_sql(_APPEND, params).all()
        if not rows:
            return None
        return [(position, group) for position, group, _ in sorted(rows, key=lambda r: r[2])]

    def dispose(self) -> None:
        self._autocommit.dispose()
        super().dispose()

    @contextmanager
    def translate_errors(self) -> Iterator[None]:
        try:
            yield
        except sa.exc.DBAPIError as e:
            _raise_translated(e.orig, e)
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
