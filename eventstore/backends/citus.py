"""Citus: PostgreSQL sharded over worker nodes, reached through its coordinator.

Everything but the global order is PostgreSQL's (``eventstore.backends.postgres``):
oblivio sends every statement to the coordinator, which routes it; only the
horizon's guard below also asks the workers themselves (read-only).

The global order on a cluster.  Each node has its own transaction ids and its
own snapshots, so a worker's horizon says nothing about a writer running on
another worker.  What every writer shares is the coordinator: all of
oblivio's transactions begin there, and the append's ``pg_current_xact_id()``
is evaluated there before Citus routes the statement (Citus evaluates the
functions of a modification on the coordinator; the tier's tests check it).
So the log keeps ONE merged order, ``(commit_group, position)`` with the
coordinator's transaction id as commit group, and a reader's horizon is read
on the coordinator, in a statement of its own that runs BEFORE the page's
read on the workers:

- A transaction whose only remote write is on one worker (an append to an
  existing stream generation: its head, events and graph rows all sit on the
  stream's shard) commits there in PRE_COMMIT, before its coordinator xid
  leaves the coordinator's snapshots: an xid below the coordinator horizon has
  ended, so its rows were committed on their worker before the horizon was
  read, and the page, read on the workers later, sees them.
- A transaction that also wrote a table of the coordinator's (creating a
  stream generation writes ``stream_directory``) or several workers (an
  erasure writes the subject's shard and the audit stream's) commits with
  two-phase commit:
  its workers PREPARE in PRE_COMMIT, and COMMIT PREPARED is sent in the COMMIT
  callback, when the coordinator xid has already left the snapshots.  That
  gap would let a reader skip its rows.  But PostgreSQL releases a
  transaction's locks only after its commit callbacks, and every transaction
  with an xid holds an exclusive lock on that xid until then.  So the horizon
  is also kept at or below every xid whose lock is still held on the
  coordinator (``pg_locks``; 32-bit xids widened against the snapshot's xmax,
  from which every such xid lies less than 2^31 away, before or after it).
- A COMMIT PREPARED that fails (the worker went down in that gap) is finished
  later by Citus's 2PC recovery, after the writer released its locks.  So the
  horizon is also kept at or below every coordinator xid whose worker part is
  still prepared: Citus's own record of it (``pg_dist_transaction``, written
  by that xid) intersected with the workers' ``pg_prepared_xacts``, read over
  one connection per worker this process keeps
  (``_CLUSTER_HORIZON`` and ``CitusBackend.cluster_horizon`` below,
  ``eventstore.backends.citus_prepared``).  Only such a gid holds readers back,
  until recovery commits it (``citus.recover_2pc_interval``), never 2PC as such.

Why a separate statement: a horizon written into the page's query as a
subquery becomes Citus subplans whose placement is the planner's business;
read first, on the coordinator's own snapshot, its meaning is plain.  The
price is a round trip per log page, and under continuous writes one more to
each worker whose records the read could pass.  The rule that every writer goes through
the coordinator is the operator's (docs/scaling.md): a writer connected to a
worker directly would have a commit group from another xid counter.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC
from typing import Any

import psycopg
import psycopg.errors
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.dml import Insert

from eventstore.backends import insert_rows
from eventstore.backends.citus_prepared import PreparedOnWorkers, Worker
from eventstore.backends.port import head_params
from eventstore.backends.postgres import (
    HORIZON,
    PostgresBackend,
    binary_cursor,
    normalise_postgres_url,
    pipelined,
)
from eventstore.batch import DerivedRows, Placement, SealedBatch
from eventstore.errors import OperationalError
from eventstore.schema import events


def widened_xid(xid32: str, near: str) -> str:
    """SQL of the 64-bit xid whose low 32 bits are ``xid32`` (an ``xid``), nearest to
    the 64-bit xid ``near`` (a ``bigint``): the two lie within 2^31 of each other.

    The difference is taken as a signed 32-bit number, so an xid given out after
    ``near`` was read (above it) widens to above it, not 2^32 below.
    """
    return (
        f"({near} + ({xid32}::text::bigint - {near} % 4294967296 + 6442450944)"
        " % 4294967296 - 2147483648)"
    )


# The coordinator's horizon (see eventstore.backends.postgres) lowered to the
# oldest xid whose lock is still held: a writer still committing its prepared
# parts on the workers.  Locks of backends of other databases are left out as
# the horizon leaves out their xids (a backend never changes database).  The
# locks are read after the snapshot, so a lock's xid may be one given out since,
# above the snapshot's xmax: widened as such, it leaves the horizon at xmax.
_LOCKED_HORIZON = f"""
SELECT least({HORIZON}, (
    SELECT min({widened_xid("l.transactionid", "snap.xmax")})
      FROM pg_locks AS l,
           (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax) AS snap
     WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted
       AND NOT EXISTS (SELECT FROM pg_stat_activity AS a
                        WHERE a.pid = l.pid AND a.datname <> current_database())))
"""  # noqa: S608 (constant SQL)

# ... and the 2PC records that could lower it further, to the oldest xid whose
# COMMIT PREPARED has not happened on some worker yet (the failed COMMIT
# PREPARED of the module's docstring).  Citus records each worker part it
# prepares in ``pg_dist_transaction`` (the worker's group and the gid), inserted
# by the writing transaction itself before it commits: a record is visible
# exactly when its coordinator xid has committed, and the record's ``xmin`` IS
# that xid, the commit group of the rows.  Records stay after a successful
# COMMIT PREPARED until 2PC recovery clears them (every
# ``citus.recover_2pc_interval``), so a record alone proves nothing: its gid must
# still be prepared on its worker for it to hold the horizon, which
# ``CitusBackend.cluster_horizon`` asks that worker after this statement.  Only
# records below the horizon so far can lower it, and only those at or above
# ``floor`` matter to the read (see ``CitusBackend.log_params``).  One row per
# worker holding such records, as the coordinator names it, with their gids and
# xids; one row with NULLs beside the horizon when there is none.  A group no
# longer in the cluster has no primary node: no page reads it either.
_CLUSTER_HORIZON = sa.text(f"""
WITH base AS MATERIALIZED ({_LOCKED_HORIZON} AS horizon),
recorded AS (
    SELECT n.nodename, n.nodeport, n.groupid, r.gid, r.xid
      FROM base,
           (SELECT t.groupid, t.gid, {widened_xid("t.xmin", "snap.xmax")} AS xid
              FROM pg_dist_transaction AS t,
                   (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint
                           AS xmax) AS snap) AS r
           JOIN pg_dist_node AS n ON n.groupid = r.groupid AND n.noderole = 'primary'
     WHERE r.xid < base.horizon AND r.xid >= :floor)
SELECT base.horizon, w.nodename, w.nodeport, w.groupid, w.gids, w.xids
  FROM base
  LEFT JOIN (SELECT nodename, nodeport, groupid,
                    array_agg(gid) AS gids, array_agg(xid) AS xids
               FROM recorded GROUP BY nodename, nodeport, groupid) AS w ON true
""")  # noqa: S608 (constant SQL)

# The append on the cluster: the head's conditional UPDATE (the single server's
# condition, see eventstore.backends.postgres) and the events' multi-row VALUES
# INSERT, two statements sent together.  Each names the stream id, so Citus routes
# each as one task to the stream's shard, over the connection that took the stream
# row's lock: the transaction touches one worker over one connection and commits
# with one-phase commit.  The single server's one statement (a data-modifying CTE
# that inserts FROM the moved head, or an INSERT … SELECT FROM unnest(…)) is planned
# by Citus as "pull to coordinator", its rows copied into the shard over a second
# connection, and two connections to one worker commit with two-phase commit.  The
# rows do not come FROM the moved head here: when the head did not move they are
# taken out again (``_TAKE_BACK``), or they collide with the versions of a head that
# moved past the writer's, which aborts the transaction; either way nothing is
# written, as on one server.  Under the stream lock neither happens.  (One statement
# holding both as data-modifying CTEs is routed one-phase too, but an append took
# several times as long with it: docs/scaling.md.)  ``pg_current_xact_id()`` is
# evaluated on the coordinator before the INSERT is routed: the commit group is the
# coordinator's transaction id, as the global order needs (module docstring).
_HEAD_MOVE = """UPDATE streams SET version = %(new_version)s, chain_hash = %(chain_hash)s
 WHERE stream_id = %(stream_id)s AND version = %(old_version)s
   AND closed_at IS NULL AND key_destroyed_at IS NULL
   AND (NOT restricted OR %(past_restriction)s)"""

_EVENT_ROW = (
    "(pg_current_xact_id()::text::bigint, %(event_id{i})s, %(stream_id)s, %(version{i})s,"
    " %(type{i})s, %(schema_version{i})s, %(recorded_at)s, %(payload{i})s, %(digest{i})s,"
    " %(chain_hash{i})s)"
)
_INSERT_EVENTS = (
    "INSERT INTO events (commit_group, event_id, stream_id, version, type, schema_version,"
    " recorded_at, payload, digest, chain_hash) VALUES {values}"
    " RETURNING position, commit_group, version"
)
# The rows of an append whose head did not move, by their positions.
_TAKE_BACK = "DELETE FROM events WHERE stream_id = %(stream_id)s AND position = ANY(%(at)s)"
# Rows per INSERT: a statement takes at most 65,535 parameters (ten per row).
_ROWS_PER_INSERT = 1000


@functools.lru_cache(maxsize=64)
def _insert_events(rows: int) -> str:
    """The multi-row INSERT of ``rows`` events (kept for the row counts used lately: a
    statement of the full ``_ROWS_PER_INSERT`` rows is about 150 kB of text)."""
    values = ", ".join(_EVENT_ROW.format(i=i) for i in range(rows))
    return _INSERT_EVENTS.format(values=values)


def _append_statements(batch: SealedBatch) -> list[tuple[str, dict[str, Any]]]:
    """The batch's append: the head's move, then an INSERT of each ``_ROWS_PER_INSERT``
    events, with their values."""
    shared = {
        "stream_id": batch.stream.stream_id,
        # The column holds naive UTC, as SQLAlchemy's UTCDateTime writes it.
        "recorded_at": batch.recorded_at.astimezone(UTC).replace(tzinfo=None),
    }
    rows = list(
        zip(
            batch.events,
            batch.versions,
            batch.ciphertexts,
            batch.digests,
            batch.chain_hashes,
            strict=True,
        )
    )
    inserts: list[tuple[str, dict[str, Any]]] = []
    for start in range(0, len(rows), _ROWS_PER_INSERT):
        chunk = rows[start : start + _ROWS_PER_INSERT]
        params = dict(shared)
        for i, (event, version, payload, digest, chain_hash) in enumerate(chunk):
            params[f"event_id{i}"] = event.event_id
            params[f"version{i}"] = version
            params[f"type{i}"] = event.type
            params[f"schema_version{i}"] = event.schema_version
            params[f"payload{i}"] = payload
            params[f"digest{i}"] = digest
            params[f"chain_hash{i}"] = chain_hash
        inserts.append((_insert_events(len(chunk)), params))
    return [(_HEAD_MOVE, head_params(batch)), *inserts]


_IS_CITUS = "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')"


def has_citus(url: str) -> bool:
    """Whether the database at ``url`` has the Citus extension.

    On a connection of its own, closed at once: a pooled one would outlive
    the probe and meet the first statement as a stale connection after a
    server restart.
    """
    conninfo = sa.engine.make_url(normalise_postgres_url(url)).set(drivername="postgresql")
    try:
        with psycopg.connect(conninfo.render_as_string(hide_password=False)) as conn:
            row = conn.execute(_IS_CITUS).fetchone()
    except psycopg.Error as e:
        raise OperationalError(f"PostgreSQL could not be reached: {e}") from e
    return bool(row and row[0])


class CitusBackend(PostgresBackend):
    name = "citus"
    # One connection per worker node in a transaction.  A transaction that has
    # read several shards of a node over parallel connections (the check that
    # caller-supplied event ids are new, a subject's rows across the log) may
    # not write a coordinator table that has a foreign key afterwards; Citus
    # refuses it, since the write could not see those connections' locks.
    session_options = PostgresBackend.session_options + (
        " -c citus.multi_shard_modify_mode=sequential"
    )

    def after_cursor(self) -> sa.ColumnElement[bool]:
        # The horizon comes in as a parameter, read by ``log_params`` just before.
        after = sa.tuple_(events.c.commit_group, events.c.position) > sa.tuple_(
            sa.bindparam("group", type_=sa.BigInteger()),
            sa.bindparam("position", type_=sa.BigInteger()),
        )
        horizon = sa.func.greatest(
            sa.bindparam("horizon", type_=sa.BigInteger()),
            sa.bindparam("settled", type_=sa.BigInteger()),
        )
        return sa.and_(after, events.c.commit_group < horizon)

    def __init__(self, url: str) -> None:
        super().__init__(url)
        # The highest horizon read so far: every 2PC record below it has had its
        # worker parts committed (checked then, or by an earlier read below its
        # own floor), which stays true, so no later read needs to ask about it.
        self._confirmed = 0
        self._confirmed_lock = threading.Lock()
        self._prepared = PreparedOnWorkers(normalise_postgres_url(url))

    @contextmanager
    def append_connection(self) -> Iterator[Connection]:
        # Several statements (see ``append``): a transaction of their own, begun in
        # the append's pipeline and ended here, on a connection of the autocommit
        # pool (durable, as the server's one-statement append).  There psycopg sends
        # no BEGIN of its own, so the append's goes out with its statements: on a
        # connection in a transaction, the BEGIN went out alone before the pipeline
        # (psycopg's own waits for its answer), one round trip more for every store
        # at a remembered head.
        with self.translate_errors(), self._autocommit.connect() as conn:
            driver = _driver_of(conn)
            try:
                yield conn
            except BaseException:
                if not driver.closed:  # a lost connection has no transaction left
                    driver.rollback()
                raise
            driver.commit()

    def append(
        self,
        conn: Connection,
        batch: SealedBatch,
        derived: Sequence[DerivedRows],
        *,
        last: bool = False,
    ) -> list[Placement] | None:
        # The head's UPDATE, the events' multi-row INSERT and each derived part's
        # INSERTs in one pipeline (one wait for all), each routed to the stream's
        # shard on the connection that holds it: one-phase commit (above).  The
        # COMMIT stays apart even when ``last``: the rows of a head that did not move
        # are written here and must be taken back (or rolled back) before it.
        statements = _append_statements(batch)
        driver = _driver_of(conn)
        with contextlib.ExitStack() as cursors:
            appends = [cursors.enter_context(binary_cursor(conn)) for _ in statements]
            try:
                with pipelined(conn):
                    if driver.autocommit:  # ``append_connection``'s: the append begins
                        driver.execute(b"BEGIN")
                    for cursor, (sql, params) in zip(appends, statements, strict=True):
                        cursor.execute(sql, params)
                    for part in derived:
                        insert = _derived_insert(part.table, part.unless_present)
                        insert_rows(conn, insert, part.rows)
            except psycopg.errors.UniqueViolation:
                # Versions that exist already: the head had moved past the writer's
                # (an append at a stale remembered head), the same "did not move"
                # the single server's statement reports, in a transaction now
                # aborted, which the caller rolls back.
                if appends[0].rowcount != 0:
                    raise
                return None
            moved = appends[0].rowcount == 1
            rows = [row for inserted in appends[1:] for row in inserted.fetchall()]
            if not moved:
                # The events went in beside a head that stayed (a closed or
                # restricted stream, a key destroyed): taken out again, so that the
                # log holds nothing of them even if the caller commits.  (Derived
                # rows are the caller's to roll back, as the port says.)
                positions = [position for position, _, _ in rows]
                appends[0].execute(
                    _TAKE_BACK, {"stream_id": batch.stream.stream_id, "at": positions}
                )
                return None
        return [(position, group) for position, group, _ in sorted(rows, key=lambda r: r[2])]

    def log_params(self, conn: Connection, cursor: Mapping[str, Any]) -> dict[str, Any]:
        # Records below the floor cannot hold this read back: a group at or below
        # the cursor's was delivered (a cursor names an event a read delivered,
        # and a group is delivered only once nothing of it is still prepared on
        # any worker), ``settled`` is one past a group a read showed, and below
        # ``_confirmed`` every record was found committed.
        floor = max(cursor["group"] + 1, cursor["settled"], self._confirmed)
        horizon = self.cluster_horizon(conn, floor)
        with self._confirmed_lock:
            self._confirmed = max(self._confirmed, horizon)
        return {"horizon": horizon}

    def cluster_horizon(self, conn: Connection, floor: int) -> int:
        """The horizon of a log read on ``conn`` (a statement read, on the coordinator)
        that needs no 2PC record below ``floor`` checked.

        The workers are asked after the coordinator's statement, so each record
        its snapshot saw has its worker part either still prepared when asked
        (it holds the horizon) or committed before the page, read after this,
        reads that worker.  A worker that does not answer raises
        :class:`OperationalError`.
        """
        rows = conn.execute(_CLUSTER_HORIZON, {"floor": floor}).all()
        horizon = int(rows[0].horizon)
        for row in rows:
            if row.gids is None:
                continue  # no record to ask about
            oldest: dict[str, int] = {}
            for gid, xid in zip(row.gids, row.xids, strict=True):
                # A gid Citus gave out again after a restart: its oldest xid holds.
                oldest[gid] = min(xid, oldest.get(gid, xid))
            worker = Worker(row.nodename, row.nodeport, row.groupid)
            for gid in self._prepared.still_prepared(worker, oldest):
                horizon = min(horizon, oldest[gid])
        return horizon

    def dispose(self) -> None:
        self._prepared.close()
        super().dispose()


def _driver_of(conn: Connection) -> psycopg.Connection[Any]:
    driver: psycopg.Connection[Any] | None = conn.connection.driver_connection
    assert driver is not None  # a live pooled connection
    return driver


@functools.cache
def _derived_insert(table: sa.Table, unless_present: bool) -> Insert:
    """The INSERT of a derived part into ``table``, built once (``insert_rows`` keeps
    each statement's compiled SQL by the statement)."""
    return pg_insert(table).on_conflict_do_nothing() if unless_present else table.insert()


# -- the distributed layout -----------------------------------------------------------
#
# Which table goes where, decided from the schema itself (so that tables other
# packages add later follow the same rule at their next ``db upgrade``):
#
# - Distributed by ``stream_id``, co-located with ``events``: the log, the stream
#   rows (``streams``: each generation's head, which an append locks FOR UPDATE and
#   moves) and their ``data_keys``, and every table whose primary key includes a
#   NOT NULL ``stream_id`` (the projections' per-stream rows).  A stream is one
#   generation of one subject, so one operation's rows (its head, its events, its
#   graph rows, its vectors) sit on one shard, every join between them on
#   ``stream_id`` stays on that shard, and an append touches one worker: Citus
#   commits it with one-phase commit.
# - On the coordinator, in Citus's metadata ("Citus local tables", so that a
#   transaction writing one of them and a shard commits with two-phase commit):
#   ``stream_directory`` (which stream is a subject's generation, looked up by
#   subject; written once per generation, read by every append before it locks
#   the stream row by id), and everything that is about the deployment rather
#   than about a subject (API keys, erasure requests, certificates, jobs,
#   checkpoints, the scheduler's tables): small, locked row by row, joined with
#   everything.
#
# Citus enforces a primary key or unique constraint of a distributed table
# only if it contains the distribution column, so each one that lacks
# ``stream_id`` is rebuilt with it in front, under the same name (the
# event-id constraint's name is how a duplicate event id is recognised).
# Row values do not change: the associated data sealed into every ciphertext
# (stream id, event id, version) stays what it was, nothing is re-encrypted.

_ANCHOR = "events"
# Keyed by stream id, yet looked up by subject: it stays on the coordinator.
_CENTRAL = frozenset({"stream_directory"})
# Keyed otherwise, but each row belongs to one stream: with it.
_WITH_THEIR_STREAM = frozenset({"data_keys"})

_TABLES = sa.text("""
SELECT c.relname,
       EXISTS (SELECT FROM pg_constraint k JOIN pg_attribute a
                 ON a.attrelid = k.conrelid AND a.attnum = ANY (k.conkey)
                WHERE k.conrelid = c.oid AND k.contype = 'p'
                  AND a.attname = 'stream_id' AND a.attnotnull) AS keyed_by_stream,
       (SELECT p.partmethod FROM pg_dist_partition p WHERE p.logicalrelid = c.oid) AS method
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
   AND c.relname <> 'alembic_version'
 ORDER BY c.relname
""")

# Unique constraints and unique indexes without ``stream_id``, with their definitions.
_KEYS_WITHOUT_STREAM = sa.text("""
SELECT i.indexrelid::regclass::text AS name, k.contype, pg_get_indexdef(i.indexrelid) AS def,
       (SELECT array_agg(a.attname ORDER BY x.n) FROM unnest(i.indkey) WITH ORDINALITY x(attnum, n)
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = x.attnum) AS columns
  FROM pg_index i LEFT JOIN pg_constraint k ON k.conindid = i.indexrelid
 WHERE i.indrelid = CAST(:table AS regclass) AND i.indisunique
   AND NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = i.indrelid
                     AND a.attnum = ANY (i.indkey) AND a.attname = 'stream_id')
""")


_UNDISTRIBUTE = sa.text("SELECT undistribute_table(:t, cascade_via_foreign_keys => true)")
_DISTRIBUTE = sa.text("SELECT create_distributed_table(:t, 'stream_id', colocate_with => :c)")
_ADD_LOCAL = sa.text(
    "SELECT citus_add_local_table_to_metadata(:t, cascade_via_foreign_keys => true)"
)
_IN_CITUS = sa.text(
    "SELECT EXISTS (SELECT FROM pg_dist_partition WHERE logicalrelid = CAST(:t AS regclass))"
)


def place_tables(engine: Engine) -> list[str]:
    """On a Citus coordinator (a PostgreSQL ``engine`` whose database has the
    extension), :func:`distribute`; elsewhere nothing.  What it placed."""
    with engine.begin() as conn:
        if not conn.execute(sa.text(_IS_CITUS)).scalar_one():
            return []
        return distribute(conn)


def distribute(conn: Connection) -> list[str]:
    """Give every table of the schema its place on the cluster (see above); idempotent.

    Returns the tables it distributed or added to Citus's metadata this time.
    """
    placed = []
    # One transaction for the whole layout; Citus then needs one connection per
    # node for it, as it does when local tables with foreign keys are involved.
    conn.execute(sa.text("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"))
    rows = conn.execute(_TABLES).all()
    tables = {t.relname: t.method for t in rows}
    distributed = sorted(
        t.relname
        for t in rows
        if t.relname in (_ANCHOR, *_WITH_THEIR_STREAM)
        or (t.keyed_by_stream and t.relname not in _CENTRAL)
    )
    # A table placed on the coordinator by an older layout (``streams`` and
    # ``data_keys`` were, before the stream directory) becomes a plain table again
    # first, with the local tables its foreign keys join it to; those are added back
    # below.  Its rows are copied onto the shards as any table's.
    for name in distributed:
        if tables[name] not in (None, "h") and _in_citus(conn, name):
            conn.execute(_UNDISTRIBUTE, {"t": name})
    for name in _referenced_first([_ANCHOR, *(n for n in distributed if n != _ANCHOR)]):
        if tables[name] == "h":
            continue
        _key_by_stream(conn, name)
        colocation = "none" if name == _ANCHOR else _ANCHOR
        conn.execute(_DISTRIBUTE, {"t": name, "c": colocation})
        placed.append(name)
    for name in tables:
        if name in distributed or _in_citus(conn, name):
            # Already there, or came in with a table its foreign key joins it to.
            continue
        conn.execute(_ADD_LOCAL, {"t": name})
        placed.append(name)
    return placed


def _referenced_first(names: list[str]) -> list[str]:
    """``names`` with ``streams`` before ``data_keys``, whose foreign key references it
    (a distributed table's foreign key may only reference a distributed table)."""
    return sorted(names, key=lambda n: n in _WITH_THEIR_STREAM)


def _in_citus(conn: Connection, table: str) -> bool:
    return bool(conn.execute(_IN_CITUS, {"t": table}).scalar_one())


def _key_by_stream(conn: Connection, table: str) -> None:
    """Rebuild each unique key of ``table`` that lacks ``stream_id`` with it in front."""
    for key in conn.execute(_KEYS_WITHOUT_STREAM, {"table": table}).all():
        columns = ", ".join(f'"{c}"' for c in ["stream_id", *key.columns])
        if key.contype in ("p", "u"):
            kind = "PRIMARY KEY" if key.contype == "p" else "UNIQUE"
            conn.execute(sa.text(f'ALTER TABLE "{table}" DROP CONSTRAINT "{key.name}"'))
            conn.execute(
                sa.text(f'ALTER TABLE "{table}" ADD CONSTRAINT "{key.name}" {kind} ({columns})')
            )
        else:
            conn.execute(sa.text(f'DROP INDEX "{key.name}"'))
            conn.execute(sa.text(f'CREATE UNIQUE INDEX "{key.name}" ON "{table}" ({columns})'))
