"""Small helpers shared by the memory-operation tests."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa

from eventstore import RecordedEvent
from eventstore.backends.postgres import PostgresBackend
from eventstore.schema import events
from oblivio import LifecycleState, MemoryClient, Node, NodeType, Scope, SourceType

EVIDENCE_MESSAGE = "Evidence event is not available in the node owner and scope"


def a_fact(**fields: Any) -> Node:
    """A node made here, not stored: an active fact "x" the user stated, with ``fields``."""
    then = datetime(2024, 1, 1, tzinfo=UTC)
    fact = Node(
        id=uuid.uuid4(),
        event_id=uuid.uuid4(),
        content="x",
        node_type=NodeType.FACT,
        scope=Scope.PERSONAL,
        source_type=SourceType.USER_STATED,
        lifecycle=LifecycleState.ACTIVE,
        confidence_base=0.7,
        salience_base=0.5,
        reinforcement_boost=0.0,
        reinforcement_count=0,
        created_at=then,
        updated_at=then,
        occurred_at=then,
    )
    return dataclasses.replace(fact, **fields)


@contextmanager
def statements(client: MemoryClient) -> Iterator[list[str]]:
    """Every SQL statement sent inside the block, by any engine of the process (on
    PostgreSQL the store reads through a second, autocommit pool).

    PostgreSQL's hot reads go through psycopg's own cursor, which SQLAlchemy's
    events do not see: those are recorded where the backend compiles them.
    """
    seen: list[str] = []
    engine = sa.engine.Engine
    backend = client.context.store.backend
    driver_fetch = backend.fetch

    def record(*args: Any) -> None:
        seen.append(args[2])

    def fetch(conn: sa.Connection, query: sa.Select[Any], params: dict[str, Any]) -> Any:
        seen.append(str(query.compile(dialect=backend.engine.dialect)))
        return driver_fetch(conn, query, params)

    sa.event.listen(engine, "before_cursor_execute", record)
    if isinstance(backend, PostgresBackend):
        backend.fetch = fetch  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
        vars(backend).pop("fetch", None)


def log_ids(client: MemoryClient) -> list[uuid.UUID]:
    """Every event committed to the log, by position.

    Read from the table rather than with ``read_all``: on PostgreSQL a
    subscriber sees an event only once no older transaction of the database is
    still running, which would make "nothing was written" unprovable.
    """
    query = sa.select(events.c.event_id).order_by(events.c.position)
    with client.context.store.backend.engine.connect() as conn:
        return list(conn.execute(query).scalars())


def stream(client: MemoryClient, user_id: str) -> list[RecordedEvent]:
    """The user's stream, in version order."""
    return client.context.store.read_stream(client.context.namespace, user_id)


def events_of_type(client: MemoryClient, user_id: str, event_type: str) -> list[RecordedEvent]:
    return [e for e in stream(client, user_id) if e.type == event_type]


@contextmanager
def nothing_written(client: MemoryClient) -> Iterator[None]:
    """Assert that the block appends nothing to the log (also when it raises)."""
    before = log_ids(client)
    try:
        yield
    finally:
        assert log_ids(client) == before, "the log changed"


def rejects(
    client: MemoryClient,
    call: Callable[[], Any],
    error: type[BaseException] = ValueError,
    message: str | None = None,
) -> BaseException:
    """``call`` raises ``error`` (a ValueError), with ``message`` if given, and writes nothing."""
    with nothing_written(client), pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, ValueError), f"{type(caught.value)} is not a ValueError"
    if message is not None:
        assert str(caught.value) == message
    return caught.value


def remember(
    client: MemoryClient, content: str, user_id: str = "alice", **fields: Any
) -> tuple[uuid.UUID, Node]:
    """Store ``content`` and return its event id and its (single) node."""
    event_id = client.store(content, user_id=user_id, **fields)
    [node] = client.get_event_nodes(event_id, user_id=user_id)
    return event_id, node


def current(client: MemoryClient, node: Node, user_id: str = "alice") -> Node:
    """The node as stored now, whatever its lifecycle."""
    found = client.get_node(node.id, user_id=user_id, include_superseded=True)
    assert found is not None
    return found
