"""Citus: PostgreSQL sharded over worker nodes, reached through its coordinator.

Everything but the global order is PostgreSQL's (``eventstore.backends.postgres``):
oblivio connects to the coordinator only, which routes each statement.

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

- A transaction that wrote to one worker (every append: a subject's rows are
  on one shard) commits there in PRE_COMMIT, before its coordinator xid
  leaves the coordinator's snapshots.  An xid below the coordinator horizon
  has ended, so its rows were committed on their worker before the horizon was
  read, and the page, read on the workers later, sees them.
- A transaction that wrote to several workers (an erasure writes the
  subject's shard and the audit stream's) commits with two-phase commit: its
  workers PREPARE in PRE_COMMIT, and COMMIT PREPARED is sent in the COMMIT
  callback, when the coordinator xid has already left the snapshots.  That
  gap would let a reader skip its rows.  But PostgreSQL releases a
  transaction's locks only after its commit callbacks, and every transaction
  with an xid holds an exclusive lock on that xid until then.  So the horizon
  is also kept at or below every xid whose lock is still held on the
  coordinator (``pg_locks``; 32-bit xids widened against the snapshot's xmax,
  which every such xid precedes by less than 2^31).
- Not covered: a COMMIT PREPARED that fails (the worker went down in that
  gap) is finished later by Citus's 2PC recovery, after the writer released
  its locks; rows committed then may land below a horizon already passed.
  docs/scaling.md lists it with the remaining work.

Why a separate statement: a horizon written into the page's query as a
subquery becomes Citus subplans whose placement is the planner's business;
read first, on the coordinator's own snapshot, its meaning is plain.  The
price is a round trip per log page.  The rule that every writer goes through
the coordinator is the operator's (docs/scaling.md): a writer connected to a
worker directly would have a commit group from another xid counter.
"""

from __future__ import annotations

from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.backends.postgres import HORIZON, PostgresBackend, normalise_postgres_url
from eventstore.errors import OperationalError
from eventstore.schema import events

# The coordinator's horizon (see eventstore.backends.postgres) lowered to the
# oldest xid whose lock is still held: a writer still committing its prepared
# parts on the workers.  Locks of backends of other databases are left out as
# the horizon leaves out their xids (a backend never changes database).
_CLUSTER_HORIZON = sa.text(f"""
SELECT least({HORIZON}, (
    SELECT min(xmax - ((xmax % 4294967296 - l.transactionid::text::bigint + 4294967296)
                       % 4294967296))
      FROM pg_locks AS l,
           (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xmax) AS snap
     WHERE l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock' AND l.granted
       AND NOT EXISTS (SELECT FROM pg_stat_activity AS a
                        WHERE a.pid = l.pid AND a.datname <> current_database())))
""")  # noqa: S608 (constant SQL)

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

    def log_params(self, conn: Connection) -> dict[str, Any]:
        return {"horizon": int(conn.execute(_CLUSTER_HORIZON).scalar_one())}
