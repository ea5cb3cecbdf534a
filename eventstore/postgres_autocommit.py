"""Idle psycopg connections in autocommit mode, for PostgreSQL's one-statement writes.

An optimistic append is one autocommitted statement (:mod:`eventstore.heads`).
Borrowing a connection from SQLAlchemy's pool for it, switching it to
autocommit and back and returning it (with the pool's reset) cost about a
fifth of a single append's client CPU time, more than the statement's own
parameters.  These connections stay in autocommit for their whole life, so a
borrow is a list pop under a lock.

A connection goes back only when it is idle outside any transaction and
belongs to this process; one that failed, broke or crossed a ``fork`` is
closed or dropped, and the next borrower opens a new one.  Like the
SQLAlchemy pool's ``pool_recycle``, a connection older than ``recycle_after``
seconds is closed instead of used, before a firewall or server timeout can
drop it.  At most ``keep`` idle connections are kept and at most ``limit``
are open; a borrower beyond the limit waits up to ``timeout`` seconds, like
one waiting for SQLAlchemy's pool, and then gets :class:`PoolExhaustedError`.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from eventstore.errors import OperationalError

Connect = Callable[[], "psycopg.Connection[Any]"]


class PoolExhaustedError(OperationalError):
    """Every allowed connection stayed busy for the whole timeout."""


class AutocommitConnections:
    """A small LIFO of open autocommit connections, safe across threads."""

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
        self._open = threading.BoundedSemaphore(limit)
        self._timeout = timeout
        self._recycle_after = recycle_after
        # (connection, monotonic time it was opened), most recently used last
        self._idle: list[tuple[psycopg.Connection[Any], float]] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        if not self._open.acquire(timeout=self._timeout):
            raise PoolExhaustedError(f"no PostgreSQL connection free within {self._timeout} s")
        try:
            driver, opened = self._take() or (self._connect(), time.monotonic())
            try:
                yield driver
            finally:
                self._give_back(driver, opened)
        finally:
            self._open.release()

    def close(self) -> None:
        """Close every idle connection (those in use close when they come back)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._keep = 0
        for driver, _ in idle:
            driver.close()

    def _take(self) -> tuple[psycopg.Connection[Any], float] | None:
        if os.getpid() != self._pid:
            # A forked child shares its parent's sockets: it must never use
            # them (nor close them, which would end the parent's sessions).
            with self._lock:
                self._idle, self._pid = [], os.getpid()
            return None
        while True:
            with self._lock:
                if not self._idle:
                    return None
                driver, opened = self._idle.pop()
            if time.monotonic() - opened < self._recycle_after:
                return driver, opened
            driver.close()

    def _give_back(self, driver: psycopg.Connection[Any], opened: float) -> None:
        reusable = (
            not driver.closed
            and driver.info.transaction_status == TransactionStatus.IDLE
            and os.getpid() == self._pid
        )
        if reusable:
            with self._lock:
                if len(self._idle) < self._keep:
                    self._idle.append((driver, opened))
                    return
        driver.close()
