"""A connection the PostgreSQL server dropped is not handed out again.

Hot reads and appends run on psycopg's own cursor inside the backend, where
SQLAlchemy does not see the driver's errors; the backend must discard the
pooled connection itself, or the next read would fail on the same dead one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from eventstore import (
    EventStore,
    NewEvent,
    OperationalError,
    RecordedEvent,
    StreamRef,
    Subject,
    create_backend,
)
from eventstore.batch import DerivedRows
from eventstore.keys import KeyringFile

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_store(postgres_url: str, keyring: KeyringFile) -> Iterator[EventStore]:
    event_store = EventStore(create_backend(postgres_url), keyring)
    yield event_store
    event_store.close()


def terminate_other_sessions(url: str) -> int:
    """Drop every other session on the test's database, as a server restart would."""
    admin = create_backend(url)
    try:
        with admin.engine.connect() as conn:
            return len(
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                ).all()
            )
    finally:
        admin.dispose()


def test_a_read_after_the_server_dropped_its_connection_gets_a_fresh_one(
    pg_store: EventStore, postgres_url: str
) -> None:
    pg_store.append("default", "ann", [NewEvent("memory.stored", {"n": 1})])
    with pg_store.backend.statement_reads(), pg_store.backend.statement_reads():
        pass  # two pooled connections, both about to die
    assert terminate_other_sessions(postgres_url) >= 2
    with pytest.raises(OperationalError):
        pg_store.read_stream("default", "ann")
    assert [e.data for e in pg_store.read_stream("default", "ann")] == [{"n": 1}]


def test_an_append_after_the_server_dropped_its_connection_gets_a_fresh_one(
    pg_store: EventStore, postgres_url: str
) -> None:
    pg_store.append("default", "bob", [NewEvent("memory.stored", {"n": 1})])
    with pg_store.backend.write_connection(), pg_store.backend.write_connection():
        pass
    assert terminate_other_sessions(postgres_url) >= 2
    with pytest.raises(OperationalError):
        pg_store.append("default", "bob", [NewEvent("memory.stored", {"n": 2})])
    pg_store.append("default", "bob", [NewEvent("memory.stored", {"n": 3})])
    assert [e.data for e in pg_store.read_stream("default", "bob")] == [{"n": 1}, {"n": 3}]


def test_an_append_at_a_remembered_head_after_the_server_dropped_its_connection(
    pg_store: EventStore, postgres_url: str
) -> None:
    """The appends at a remembered head keep one connection between them: once the server
    dropped it, one append fails, and the next one gets a fresh connection."""
    subject = Subject("default", "cid")
    contents = iter(range(1, 5))

    def events_of(_stream: StreamRef) -> list[NewEvent]:
        return [NewEvent("memory.stored", {"n": next(contents)})]

    def nothing(_cipher: object, _appended: list[RecordedEvent]) -> tuple[list[DerivedRows], None]:
        return [], None

    pg_store.append_each(subject, events_of, nothing)  # the stream, under its lock
    pg_store.append_each(subject, events_of, nothing)  # at the remembered head: kept
    assert terminate_other_sessions(postgres_url) >= 1
    with pytest.raises(OperationalError):
        pg_store.append_each(subject, events_of, nothing)
    pg_store.append_each(subject, events_of, nothing)
    assert [e.data for e in pg_store.read_stream("default", "cid")] == [
        {"n": 1},
        {"n": 2},
        {"n": 4},
    ]
