"""Which two-phase commit parts a Citus worker still holds prepared, asked over a kept connection.

The cluster horizon (``eventstore.backends.citus``) must know, for the 2PC
records a read could pass, whether each one's worker part is still prepared on
its worker.  Asking through the coordinator (``master_run_on_worker``) opened a
new connection to each worker per ask, which cost that worker a backend's
start (about 11 ms of CPU) on every log page under continuous writes.  Here
each process keeps one connection per worker instead, opened on first use and
reused by every later ask: an ask is then one small query on a live backend.

The workers are reached as the coordinator names them (``pg_dist_node``), with
the coordinator URL's user, password, database and options: oblivio's
processes must be able to connect to the workers directly, as Citus's
coordinator does (docs/scaling.md).  A name that reaches another server from
here (``localhost`` in ``pg_dist_node`` seen from another host) would answer
"not prepared" for gids it never held, so each new connection must first show
that it reached a Citus node of the expected group (``pg_dist_local_group``),
or the read fails.

A kept connection is only a faster way to ask, never a source of an answer:

- it runs in autocommit, and ``pg_prepared_xacts`` reads the worker's shared
  memory when the query runs, so each answer is the worker's state at that
  moment, after the coordinator's statement that named the gids;
- a connection that fails (the worker restarted, the network dropped it) is
  closed and opened again once; a worker that still does not answer raises
  :class:`~eventstore.errors.OperationalError` (retryable), as a read of its
  shards would fail;
- a connection is never used by two threads at once (one lock per worker) nor
  by a process forked from the one that opened it (the child would read answers
  meant for its parent on the shared socket): a child opens its own.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection
from typing import Any, NamedTuple

import psycopg
import sqlalchemy as sa
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from eventstore.errors import OperationalError

#: How the kept connections show in a worker's ``pg_stat_activity``.
APPLICATION_NAME = "oblivio horizon guard"
#: Seconds a (re)connection may take unless the URL says otherwise: a worker
#: that cannot be reached fails the read then instead of hanging it.
CONNECT_TIMEOUT = 10

# The given gids this worker still holds prepared in this database.
_STILL_PREPARED = (
    "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND gid = ANY (%s)"
)
# The group a Citus node knows itself as (the coordinator's is 0).
_OWN_GROUP = "SELECT groupid FROM pg_dist_local_group"


class Worker(NamedTuple):
    """A worker as the coordinator's ``pg_dist_node`` names it."""

    host: str
    port: int
    group: int


class _Kept:
    """One worker's connection, the process that opened it, and the lock of its use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.conn: psycopg.Connection[Any] | None = None
        self.pid = 0


class PreparedOnWorkers:
    """Asks Citus workers which of given gids they still hold prepared."""

    def __init__(self, coordinator_url: str) -> None:
        url = sa.engine.make_url(coordinator_url).set(drivername="postgresql")
        self._params = conninfo_to_dict(url.render_as_string(hide_password=False))
        # The worker's name and port replace the coordinator's; these would not.
        for overriding in ("hostaddr", "service"):
            self._params.pop(overriding, None)
        self._params.setdefault("connect_timeout", CONNECT_TIMEOUT)
        self._params["application_name"] = APPLICATION_NAME
        self._workers: dict[Worker, _Kept] = {}
        self._workers_lock = threading.Lock()
        # Connections a forked child inherited: never used, and never closed or
        # collected either, since libpq's close sends its parent's session a
        # Terminate over the shared socket.
        self._inherited: list[psycopg.Connection[Any]] = []

    def still_prepared(self, worker: Worker, gids: Collection[str]) -> set[str]:
        """Those of ``gids`` that ``worker`` holds prepared now."""
        kept = self._kept(worker)
        with kept.lock:
            if kept.conn is not None and kept.pid == os.getpid():
                try:
                    return _ask(kept.conn, gids)
                except psycopg.Error:
                    kept.conn.close()  # stale: the worker restarted or dropped it
            elif kept.conn is not None:
                self._inherited.append(kept.conn)
            kept.conn = None
            try:
                kept.conn = self._connect(worker)
                kept.pid = os.getpid()
                return _ask(kept.conn, gids)
            except psycopg.Error as e:
                if kept.conn is not None:
                    kept.conn.close()
                    kept.conn = None
                raise OperationalError(
                    f"the Citus worker {worker.host}:{worker.port} did not answer"
                    f" for its prepared transactions: {e}"
                ) from e

    def _connect(self, worker: Worker) -> psycopg.Connection[Any]:
        """A connection to ``worker`` that showed it reached the node of its group."""
        params = {**self._params, "host": worker.host, "port": worker.port}
        conn = psycopg.connect(make_conninfo("", **params), autocommit=True)
        row = conn.execute(_OWN_GROUP).fetchone()
        if row is None or row[0] != worker.group:
            conn.close()
            raise psycopg.OperationalError(
                f"it is not the node of group {worker.group} (it says {row and row[0]})"
            )
        return conn

    def close(self) -> None:
        """Close this process's kept connections."""
        with self._workers_lock:
            workers, self._workers = list(self._workers.values()), {}
        for kept in workers:
            with kept.lock:
                if kept.conn is not None and kept.pid == os.getpid():
                    kept.conn.close()
                elif kept.conn is not None:
                    self._inherited.append(kept.conn)
                kept.conn = None

    def _kept(self, worker: Worker) -> _Kept:
        with self._workers_lock:
            return self._workers.setdefault(worker, _Kept())


def _ask(conn: psycopg.Connection[Any], gids: Collection[str]) -> set[str]:
    return {gid for (gid,) in conn.execute(_STILL_PREPARED, (list(gids),))}
