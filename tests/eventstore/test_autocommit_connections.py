"""PostgreSQL's one-statement appends on connections that stay in autocommit.

The optimistic append keeps a few psycopg connections of its own
(eventstore.postgres_autocommit) instead of borrowing SQLAlchemy's pooled ones.  A
connection must come back only when it is healthy, a dead one must cost one
failed append (nothing written, a retryable error) and never a stuck store,
and closing the store must close them on the server.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from eventstore import EventStore, KeyringFile, NewEvent, OperationalError, create_backend
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


def test_a_connection_killed_on_the_server_costs_one_append_and_is_replaced(
    pg_store: EventStore, admin: sa.Connection
) -> None:
    pg_store.append("default", "alice", [stored("before")])
    [pid] = append_backend_pids(admin)
    admin.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    with pytest.raises(OperationalError):
        pg_store.append("default", "alice", [stored("lost")])
    pg_store.append("default", "alice", [stored("after")])

    contents = [e.data["content"] for e in pg_store.read_stream("default", "alice")]
    assert contents == ["before", "after"]
    assert pid not in append_backend_pids(admin)


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
