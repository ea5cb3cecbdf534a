"""Idle psycopg connections in autocommit mode, for PostgreSQL's one-statement writes.

An optimistic append is one autocommitted statement (:mod:`eventstore.heads`).
Borrowing a connection from SQLAlchemy's pool for it, switching it to
autocommit and back and returning it (with the pool's reset) cost about a
fifth of a single append's client CPU time, more than the statement's own
parameters.  These connections stay in autocommit for their whole life, so a
borrow is a list pop under a lock.

A connection goes back only when it is idle outside any transaction and
belongs to this process; one that failed, broke or crossed a ``fork`` is
closed or dropped, and the next borrower opens a new one.  An idle one the
server has ended meanwhile (a restart, a failover) is noticed before it is
lent, by its readable socket, and replaced.  Like the
SQLAlchemy pool's ``pool_recycle``, a connection older than ``recycle_after``
seconds is closed instead of used, before a firewall or server timeout can
drop it.  At most ``keep`` idle connections are kept and at most ``limit``
are open; a borrower beyond the limit waits up to ``timeout`` seconds, like
one waiting for SQLAlchemy's pool, and then gets :class:`PoolExhaustedError`.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg.pq import ConnStatus, TransactionStatus

from eventstore.errors import OperationalError

Connect = Callable[[], "psycopg.Connection[Any]"]


class PoolExhaustedError(OperationalError):
    """Every allowed connection stayed busy for the whole timeout."""


class AutocommitConnections:
    """A small LIFO of open autocommit connections, safe across threads.

    A borrow is on every single append's path, so its common case is one
    plain lock held for a pop and a count (no semaphore, no generator-based
    context manager: together they were half of the borrow's 10 µs).
    """

    def __init__(
        self,
        connect: Connect,
        keep: int,
        limit: int,
        *,
        recycle_after: float = 1800.0,
        timeout: float = 30.0,
    ) -> None:
        self._connect = connect
        self._keep = keep
        self._limit = limit
        self._timeout = timeout
        self._recycle_after = recycle_after
        # (connection, monotonic time it was opened), most recently used last
        self._idle: list[tuple[psycopg.Connection[Any], float]] = []
        self._lock = threading.Lock()
        # Borrowed connections, and borrowers waiting for one to come back.
        self._lent = 0
        self._waiting = 0
        self._returned = threading.Condition(self._lock)
        self._pid = os.getpid()

    def connection(self) -> Borrowed:
        """A context manager lending one connection for the ``with`` block."""
        return Borrowed(self)

    def close(self) -> None:
        """Close every idle connection (those in use close when they come back)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._keep = 0
        for driver, _ in idle:
            driver.close()

    def _borrow(self) -> tuple[psycopg.Connection[Any], float]:
        with self._lock:
            if self._lent >= self._limit:
                self._wait_for_a_return()
            self._lent += 1
            if os.getpid() != self._pid:
                # A forked child shares its parent's sockets: it must never
                # use them (nor close them, which would end the parent's
                # sessions).
                self._idle, self._pid = [], os.getpid()
        try:
            return self._take() or (self._connect(), time.monotonic())
        except BaseException:
            self._count_return()
            raise

    def _wait_for_a_return(self) -> None:
        """Wait (holding ``_lock`` through the condition) until fewer than the limit are lent."""
        self._waiting += 1
        try:
            if not self._returned.wait_for(lambda: self._lent < self._limit, self._timeout):
                raise PoolExhaustedError(f"no PostgreSQL connection free within {self._timeout} s")
        finally:
            self._waiting -= 1

    def _take(self) -> tuple[psycopg.Connection[Any], float] | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                driver, opened = self._idle.pop()
            if time.monotonic() - opened < self._recycle_after and _still_open(driver):
                return driver, opened
            driver.close()

    def _give_back(self, driver: psycopg.Connection[Any], opened: float) -> None:
        pgconn = driver.pgconn
        reusable = (
            pgconn.status == ConnStatus.OK
            and pgconn.transaction_status == TransactionStatus.IDLE
            and os.getpid() == self._pid
        )
        with self._lock:
            self._lent -= 1
            if self._waiting:
                self._returned.notify()
            if reusable and len(self._idle) < self._keep:
                self._idle.append((driver, opened))
                return
        driver.close()

    def _count_return(self) -> None:
        with self._lock:
            self._lent -= 1
            if self._waiting:
                self._returned.notify()


class Borrowed:
    """``with pool.connection() as driver``: a class, not a generator, for its cost."""

    __slots__ = ("_opened", "_pool", "driver")

    def __init__(self, pool: AutocommitConnections) -> None:
        self._pool = pool

    def __enter__(self) -> psycopg.Connection[Any]:
        self.driver, self._opened = self._pool._borrow()
        return self.driver

    def __exit__(self, *exc_info: object) -> None:
        self._pool._give_back(self.driver, self._opened)


def _still_open(driver: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection's session is still there, asked without a round trip.

    An idle autocommit connection expects nothing from the server, so a
    readable socket means the server has spoken first, and that is almost
    always to end the session (a restart, a failover, ``pg_terminate_backend``,
    an idle timeout): an error message, then the end of the stream.  Such a
    connection is not used again.  The rare harmless message (a setting the
    server reports on its own) costs one reconnection.  Without this check the
    first borrower of each such connection got the failure, up to ``keep``
    per process; it is one ``poll`` per borrow (``poll``, not ``select``,
    which refuses descriptors above 1023, common in a busy server process).
    """
    poller = select.poll()
    poller.register(driver.pgconn.socket, select.POLLIN)
    return not poller.poll(0)  # nothing to read, no hang-up, no error
