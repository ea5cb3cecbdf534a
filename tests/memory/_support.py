"""Small helpers shared by the memory-operation tests."""

from __future__ import annotations

import dataclasses
import tempfile
import threading
import uuid
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from typing import IO, Any

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import pq
from sqlalchemy.pool import Pool

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


# Every driver connection a pool has lent: those ``round_trips`` traces when the calling
# thread opens a cursor on one that was checked out before the call and kept since.
_checked_out: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
sa.event.listen(
    Pool,
    "checkout",
    lambda driver, *_: _checked_out.add(driver) if isinstance(driver, psycopg.Connection) else None,
)


def round_trips(call: Callable[[], object]) -> int:
    """How many times ``call`` waited for PostgreSQL: the bursts of messages the calling
    thread sent, as libpq's trace of each connection it checked out or opened a cursor
    on (a connection kept checked out, the appends', is not checked out again) shows them.

    One trace file per connection, so that two connections' lines never interleave;
    connections other threads check out meanwhile (the access-count writer's) are
    not traced, and no connection stays traced after the call.
    """
    caller = threading.get_ident()
    traces: dict[int, tuple[psycopg.Connection[Any], IO[str]]] = {}
    with ExitStack() as files:

        def traced(driver: psycopg.Connection[Any], *_: Any) -> None:
            if threading.get_ident() != caller or id(driver) in traces:
                return
            trace = files.enter_context(tempfile.TemporaryFile("w+"))
            traces[id(driver)] = (driver, trace)
            driver.pgconn.trace(trace.fileno())
            driver.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

        # Every pool's checkouts (the store's two engines, whatever they are named);
        # the calling thread's alone are traced.
        sa.event.listen(Pool, "checkout", traced)
        cursor = psycopg.Connection.cursor

        def traced_cursor(driver: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
            if driver in _checked_out:  # not one still being set up (traced at its checkout)
                traced(driver)
            return cursor(driver, *args, **kwargs)

        psycopg.Connection.cursor = traced_cursor  # type: ignore[assignment,method-assign]
        try:
            call()
        finally:
            psycopg.Connection.cursor = cursor  # type: ignore[method-assign]
            sa.event.remove(Pool, "checkout", traced)
            for driver, _ in traces.values():
                driver.pgconn.untrace()
        return sum(_waits(trace) for _, trace in traces.values())


def _waits(trace: IO[str]) -> int:
    """The bursts of client messages in one connection's libpq trace."""
    trace.seek(0)
    # Each message is a line starting with its direction; an SQL text may add lines.
    directions = [line.split("\t", 1)[0] for line in trace.read().splitlines()]
    sent = [d == "F" for d in directions if d in ("F", "B")]
    # A wait is a burst of the client's messages (F) that the server's (B) answer.
    return sum(1 for i, out in enumerate(sent) if out and not (i and sent[i - 1]))
