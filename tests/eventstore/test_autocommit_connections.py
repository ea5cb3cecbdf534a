"""PostgreSQL's one-statement appends on connections that stay in autocommit.

The optimistic append keeps a few psycopg connections of its own
(eventstore.postgres_autocommit) instead of borrowing SQLAlchemy's pooled ones.  A
connection must come back only when it is healthy, one the server ended while
it was idle must be replaced before use, one that dies in use must cost one
failed statement (nothing written, a retryable error) and never a stuck
store, and closing the store must close them on the server.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from eventstore import EventStore, KeyringFile, NewEvent, create_backend
from eventstore.postgres_autocommit import AutocommitConnections, PoolExhaustedError

pytestmark = pytest.mark.postgres


def pool(url: str, keep: int, limit: int, **options: Any) -> AutocommitConnections:
    """Autocommit connections to the test's database."""
    connect = functools.partial(psycopg.connect, url, autocommit=True)
    return AutocommitConnections(connect, keep=keep, limit=limit, **options)


def stored(content: str) -> NewEvent:
    return NewEvent("memory.stored", {"content": content})


@pytest.fixture
def pg_store(postgres_url: str, keyring: KeyringFile) -> Iterator[EventStore]:
    store = EventStore(create_backend(postgres_url), keyring)
    yield store
    store.close()


@pytest.fixture
def admin(postgres_url: str) -> Iterator[sa.Connection]:
    """A connection of the test's own, outside the store, in autocommit."""
    engine = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        yield conn.execution_options(isolation_level="AUTOCOMMIT")
    engine.dispose()


def append_backend_pids(admin: sa.Connection) -> set[int]:
    """Server processes whose last statement was an append of the optimistic path."""
    query = sa.text(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND query LIKE '%pg_current_xact_id()%' AND pid <> pg_backend_pid()"
    )
    return set(admin.execute(query).scalars())


def test_appends_reuse_one_connection(pg_store: EventStore, admin: sa.Connection) -> None:
    for i in range(5):
        pg_store.append("default", "alice", [stored(str(i))])
    assert len(append_backend_pids(admin)) == 1


def terminate(admin: sa.Connection, pid: int) -> None:
    """End a server process and wait until it is gone (its socket closed)."""
    admin.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    alive = sa.text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid")
    deadline = time.monotonic() + 10
    while admin.execute(alive, {"pid": pid}).scalar_one():
        assert time.monotonic() < deadline, f"server process {pid} did not end"
        time.sleep(0.01)


def test_a_connection_the_server_ended_while_idle_is_replaced_before_use(
    pg_store: EventStore, admin: sa.Connection
) -> None:
    # A restart, a failover or an idle timeout: the session ends while the
    # connection waits in the pool.  The next borrower sees the closed socket
    # and opens a new connection; no append or read fails for it.
    pg_store.append("default", "alice", [stored("before")])
    [pid] = append_backend_pids(admin)
    terminate(admin, pid)

    pg_store.append("default", "alice", [stored("after")])
    contents = [e.data["content"] for e in pg_store.read_stream("default", "alice")]
    assert contents == ["before", "after"]
    assert len(pg_store.read_all().events) == 2
    assert pid not in append_backend_pids(admin)


def test_a_connection_that_dies_while_lent_fails_its_statement_and_is_replaced(
    postgres_url: str, admin: sa.Connection
) -> None:
    connections = pool(postgres_url, keep=2, limit=2)
    with connections.connection() as lent:
        terminate(admin, lent.info.backend_pid)
        with pytest.raises(psycopg.OperationalError):
            lent.execute("SELECT 1")
    with connections.connection() as fresh:
        assert fresh is not lent
        assert fresh.execute("SELECT 1").fetchone() == (1,)
    connections.close()


def test_the_idle_check_works_for_sockets_numbered_above_1023(postgres_url: str) -> None:
    # A busy server process holds many descriptors; select() refuses those
    # past FD_SETSIZE, poll() does not.
    padding = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        connections = pool(postgres_url, keep=2, limit=2)
        with connections.connection() as first:
            assert first.pgconn.socket > 1023
        with connections.connection() as again:
            assert again is first
        connections.close()
    finally:
        for fd in padding:
            os.close(fd)


def test_a_failed_statement_leaves_its_connection_for_the_next_borrower(
    postgres_url: str,
) -> None:
    connections = pool(postgres_url, keep=2, limit=2)
    with pytest.raises(psycopg.errors.DivisionByZero), connections.connection() as first:
        first.execute("SELECT 1 / 0")
    with connections.connection() as again:
        assert again is first
    connections.close()
    assert first.closed


def test_a_connection_left_inside_a_transaction_is_closed_not_reused(postgres_url: str) -> None:
    connections = pool(postgres_url, keep=2, limit=2)
    with connections.connection() as first:
        first.execute("BEGIN")
    assert first.closed
    with connections.connection() as second:
        assert second is not first
        assert second.execute("SELECT 1").fetchall() == [(1,)]
    connections.close()


def test_closing_the_store_closes_its_connections_on_the_server(
    postgres_url: str, keyring: KeyringFile, admin: sa.Connection
) -> None:
    store = EventStore(create_backend(postgres_url), keyring)
    store.append("default", "alice", [stored("1")])
    assert len(append_backend_pids(admin)) == 1
    store.close()
    assert append_backend_pids(admin) == set()


def test_a_connection_past_its_recycle_age_is_closed_instead_of_used(postgres_url: str) -> None:
    connections = pool(postgres_url, keep=2, limit=2, recycle_after=0)
    with connections.connection() as first:
        pass
    with connections.connection() as second:
        assert second is not first
    assert first.closed
    connections.close()


def test_a_borrower_beyond_the_limit_waits_then_gets_a_retryable_error(postgres_url: str) -> None:
    connections = pool(postgres_url, keep=1, limit=1, timeout=0.2)
    with connections.connection(), pytest.raises(PoolExhaustedError), connections.connection():
        pass
    with connections.connection() as free_again:
        assert free_again.execute("SELECT 1").fetchall() == [(1,)]
    connections.close()


def test_a_waiting_borrower_gets_the_connection_another_gives_back(postgres_url: str) -> None:
    connections = pool(postgres_url, keep=1, limit=1, timeout=10)
    borrowed: list[psycopg.Connection[Any]] = []
    with connections.connection() as first:

        def borrow() -> None:
            with connections.connection() as driver:
                borrowed.append(driver)

        waiter = threading.Thread(target=borrow)
        waiter.start()
        time.sleep(0.2)
        assert borrowed == []  # still waiting: the limit is one
    waiter.join(timeout=5)
    assert borrowed == [first]
    connections.close()


def test_a_failed_connect_gives_its_place_back(postgres_url: str) -> None:
    attempts = []

    def connect() -> psycopg.Connection[Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise psycopg.OperationalError("refused")
        return psycopg.connect(postgres_url, autocommit=True)

    connections = AutocommitConnections(connect, keep=1, limit=1, timeout=0.2)
    with pytest.raises(psycopg.OperationalError), connections.connection():
        pass
    with connections.connection() as driver:
        assert driver.execute("SELECT 1").fetchall() == [(1,)]
    connections.close()
