"""Statements run through libpq directly (eventstore.postgres_prepared) on a real server.

The hot appends bypass psycopg's cursor, so what the cursor did for them must
still hold: values arrive as the types they were encoded for, a statement is
prepared once per connection, and errors are the exceptions psycopg raises
(the backend maps those to the log's errors, and a pool drops a broken
connection because it reports ``closed``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import psycopg
import psycopg.errors
import pytest

from eventstore import EventStore, KeyringFile, NewEvent, create_backend
from eventstore import postgres_prepared as prepared

pytestmark = pytest.mark.postgres

TYPES = {"n": "int8", "i": "int4", "t": "text", "b": "bytea", "u": "uuid", "at": "timestamp"}


@pytest.fixture
def conn(postgres_url: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        yield connection


def test_placeholders_are_numbered_once_per_name() -> None:
    stmt = prepared.statement("SELECT %(b)b, %(n)s, %(b)b::bytea", TYPES)
    assert stmt.sql == b"SELECT $1, $2, $1::bytea"
    assert stmt.parameters == ("b", "n")


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 11, 30, 7, 45, 1, 123456, tzinfo=UTC),
        datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 6, 1, 12, 0, tzinfo=timezone(timedelta(hours=-7))),
    ],
)
def test_values_arrive_as_the_types_they_were_encoded_for(
    conn: psycopg.Connection[Any], moment: datetime
) -> None:
    stmt = prepared.statement(
        "SELECT %(n)s::text, %(i)s::text, %(t)s, %(b)b, %(u)s::text, %(at)s::text", TYPES
    )
    event_id = uuid.uuid4()
    values = {
        "n": prepared.int8(-(2**63)),
        "i": prepared.int4(2**31 - 1),
        "t": prepared.text("naïve ✓ 名前"),
        "b": b"\x00\xff",
        "u": event_id.bytes,
        "at": prepared.timestamp(moment),
    }
    result = prepared.PreparedStatements().execute(conn, stmt, values)
    row = [result.get_value(0, col) for col in range(result.nfields)]
    naive_utc = moment.astimezone(UTC).replace(tzinfo=None)
    assert row == [
        b"-9223372036854775808",
        b"2147483647",
        "naïve ✓ 名前".encode(),
        b"\x00\xff",
        str(event_id).encode(),
        naive_utc.isoformat(sep=" ").encode(),
    ]


def test_a_statement_is_prepared_once_per_connection(
    conn: psycopg.Connection[Any], postgres_url: str
) -> None:
    statements = prepared.PreparedStatements()
    stmt = prepared.statement("SELECT %(n)s::bigint * 2", TYPES)
    for n in (1, 2):
        result = statements.execute(conn, stmt, {"n": prepared.int8(n)})
        assert prepared.int8_rows(result) == [(2 * n,)]
    count = "SELECT count(*) FROM pg_prepared_statements WHERE name = %s"
    assert conn.execute(count, [stmt.name.decode()]).fetchall() == [(1,)]
    with psycopg.connect(postgres_url, autocommit=True) as other:
        assert prepared.int8_rows(statements.execute(other, stmt, {"n": prepared.int8(5)})) == [
            (10,)
        ]


def test_a_unique_violation_is_psycopgs_with_its_constraint(
    conn: psycopg.Connection[Any],
) -> None:
    conn.execute("CREATE TABLE t (id bigint CONSTRAINT t_id_unique UNIQUE)")
    stmt = prepared.statement("INSERT INTO t VALUES (%(n)s)", TYPES)
    statements = prepared.PreparedStatements()
    statements.execute(conn, stmt, {"n": prepared.int8(1)})
    with pytest.raises(psycopg.errors.UniqueViolation) as raised:
        statements.execute(conn, stmt, {"n": prepared.int8(1)})
    assert raised.value.diag.constraint_name == "t_id_unique"
    # autocommit: the failed statement left no transaction behind
    assert statements.execute(conn, stmt, {"n": prepared.int8(2)})
    assert conn.execute("SELECT id FROM t ORDER BY id").fetchall() == [(1,), (2,)]


def test_a_connection_lost_midway_raises_operational_error_and_reports_closed(
    conn: psycopg.Connection[Any], postgres_url: str
) -> None:
    stmt = prepared.statement("SELECT %(n)s::bigint", TYPES)
    statements = prepared.PreparedStatements()
    statements.execute(conn, stmt, {"n": prepared.int8(1)})
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
    with pytest.raises(psycopg.OperationalError):
        statements.execute(conn, stmt, {"n": prepared.int8(1)})
    assert conn.closed


def test_appended_events_read_back_as_returned(postgres_url: str, keyring: KeyringFile) -> None:
    """Single events and batches, new streams and known ones, through the libpq path."""
    store = EventStore(create_backend(postgres_url), keyring)
    try:
        first = store.append("default", "alice", [NewEvent("memory.stored", {"n": 1})])
        single = store.append("default", "alice", [NewEvent("memory.stored", {"n": 2})])
        batch = store.append(
            "default", "alice", [NewEvent("memory.batched", {"n": n}, {"m": n}) for n in range(5)]
        )
        created = store.append("default", "bob", [NewEvent("a.b", {"n": n}) for n in range(3)])
        assert store.read_stream("default", "alice") == first + single + batch
        assert store.read_stream("default", "bob") == created
        assert [e.version for e in first + single + batch] == list(range(1, 8))
        assert store.verify().ok
    finally:
        store.close()


def test_a_session_that_lost_its_prepared_statements_prepares_them_again(
    conn: psycopg.Connection[Any],
) -> None:
    stmt = prepared.statement("SELECT %(n)s::bigint + 1", TYPES)
    statements = prepared.PreparedStatements()
    assert prepared.int8_rows(statements.execute(conn, stmt, {"n": prepared.int8(1)})) == [(2,)]
    conn.execute("DEALLOCATE ALL")
    assert prepared.int8_rows(statements.execute(conn, stmt, {"n": prepared.int8(2)})) == [(3,)]
    conn.execute("DISCARD ALL")
    assert prepared.int8_rows(statements.execute(conn, stmt, {"n": prepared.int8(3)})) == [(4,)]
