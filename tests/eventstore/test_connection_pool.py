"""A PostgreSQL process keeps the connections its busiest moment opened.

Connections a pool opened beyond its kept size used to be closed as soon as
they were returned, so a server with more concurrent requests than that size
opened (and PostgreSQL forked a backend for) a new connection every few
requests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import sqlalchemy as sa
from psycopg import pq

from eventstore import create_backend
from eventstore.backends import postgres
from eventstore.backends.port import Backend

pytestmark = pytest.mark.postgres

CONCURRENT = 8
ROUNDS = 4


@pytest.fixture
def backend(postgres_url: str) -> Iterator[Backend]:
    pg = create_backend(postgres_url)
    yield pg
    pg.dispose()


def test_concurrent_writers_reuse_the_connections_they_opened(backend: Backend) -> None:
    opened: list[object] = []
    sa.event.listen(backend.engine, "connect", lambda driver, _record: opened.append(driver))
    all_holding = threading.Barrier(CONCURRENT, timeout=30)

    def writer() -> None:
        for _ in range(ROUNDS):
            with backend.write_connection() as conn:
                conn.execute(sa.text("SELECT 1"))
                all_holding.wait()  # every writer holds a connection at once
            all_holding.wait()  # and every one has given it back

    threads = [threading.Thread(target=writer) for _ in range(CONCURRENT)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not all_holding.broken
    assert len(opened) == CONCURRENT


def test_an_autocommit_connection_of_the_main_pool_opens_no_transaction(
    backend: Backend,
) -> None:
    """A write transaction owes its BEGIN until its first statement; a connection put in
    autocommit (an operator's CREATE DATABASE) owes none."""
    with backend.engine.connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.exec_driver_sql("SELECT 1")
        driver = conn.connection.driver_connection
        assert driver is not None
        assert driver.pgconn.transaction_status == pq.TransactionStatus.IDLE


@pytest.mark.parametrize("broken_off", [False, True])
def test_an_autocommit_connection_comes_back_outside_any_transaction(
    backend: Backend, broken_off: bool
) -> None:
    """The statement reads' and appends' pool does not roll back every connection it
    takes back (they are in autocommit); one that a statement left inside a transaction
    of its own, open or failed, is rolled back before anyone borrows it again."""
    with backend.statement_reads() as conn:
        driver = conn.connection.driver_connection
        assert driver is not None
        driver.execute("BEGIN")
        if broken_off:
            with pytest.raises(Exception, match="division by zero"):
                driver.execute("SELECT 1 / 0")
        assert driver.pgconn.transaction_status != pq.TransactionStatus.IDLE
    with backend.statement_reads() as again:
        assert again.connection.driver_connection is driver  # the same one, lent again
        assert driver.pgconn.transaction_status == pq.TransactionStatus.IDLE
        assert again.exec_driver_sql("SELECT 2").scalar() == 2


def test_the_appends_keep_one_connection_lent_to_one_append_at_a_time(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append at a remembered head gets the kept connection when it is free and one
    from the pool when it is lent; the kept one is not lent past the pool's recycle age."""
    with backend.append_connection() as first, backend.append_connection() as second:
        assert second is not first  # the kept one was lent (or none kept yet)
    with backend.append_connection() as kept:
        assert kept in (first, second)  # one of the two was kept
    with backend.append_connection() as again:
        assert again is kept
    monkeypatch.setattr(postgres, "_RECYCLE_SECONDS", -1.0)
    with backend.append_connection() as fresh:
        assert fresh is not kept
        assert kept.closed  # gone back to the pool, which recycles it
