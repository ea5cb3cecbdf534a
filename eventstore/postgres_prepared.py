"""The hot append statements, sent through libpq directly: prepared once per connection.

A single-event append is one autocommitted statement whose client CPU time
was mostly psycopg's execute machinery: converting the query, dumping the
parameters through its adapters, its prepared-statement bookkeeping and its
generator-based wait loop.  The append statements are few and fixed, with
parameters of a handful of known types, so here each is prepared on a
connection the first time that connection runs it, and then executed with
``PQexecPrepared``: parameters already encoded in PostgreSQL's binary format
by the caller (:func:`int8` …), results in binary, parsed by position.

``PQexecPrepared`` blocks inside libpq; psycopg's C wrapper releases the GIL
around it (as its own wait loop does while it polls), so other threads of the
process and other writer processes run meanwhile.

Errors become the exceptions psycopg itself would raise (a unique violation
is ``psycopg.errors.UniqueViolation`` with its diagnostics, a lost
connection ``psycopg.OperationalError``), so the backend translates them
exactly as it does for statements run through a cursor, and a connection that
broke reports ``closed`` and is dropped by its pool.
"""

from __future__ import annotations

import itertools
import re
import struct
import threading
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import psycopg.errors
from psycopg.adapt import Transformer
from psycopg.postgres import types
from psycopg.pq import ConnStatus, DiagnosticField, ExecStatus, Format
from psycopg.pq.abc import PGresult

# Every parameter in binary, and the results too.
_BINARY = Format.BINARY
_INT8 = struct.Struct(">q")
_INT4 = struct.Struct(">i")
# PostgreSQL's binary timestamp: microseconds since 2000-01-01 00:00 UTC.
_PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# psycopg names its own prepared statements ``_pg3_<n>``; these never collide.
_NAMES = itertools.count(1)
_PLACEHOLDER = re.compile(r"%\((\w+)\)[sb]")
_UNKNOWN_STATEMENT = b"26000"  # invalid_sql_statement_name


def int8(value: int) -> bytes:
    return _INT8.pack(value)


def int4(value: int) -> bytes:
    return _INT4.pack(value)


def text(value: str) -> bytes:
    return value.encode()


def uuid_bytes(value: uuid.UUID) -> bytes:
    return value.bytes


def timestamp(value: datetime) -> bytes:
    """A datetime as a ``timestamp`` (without time zone) holding naive UTC.

    ``astimezone`` as the cursor path converts it: a naive value counts as local time.
    """
    return _INT8.pack((value.astimezone(UTC) - _PG_EPOCH) // _MICROSECOND)


@dataclass(frozen=True)
class Statement:
    """One statement in libpq's numbered form, with its parameters' names and types."""

    name: bytes
    sql: bytes
    parameters: tuple[str, ...]
    oids: tuple[int, ...]


def statement(sql: str, types_by_name: Mapping[str, str]) -> Statement:
    """``sql`` with psycopg's ``%(name)s`` / ``%(name)b`` placeholders numbered ``$1``, ``$2`` …

    A name used twice gets one number.  ``types_by_name`` gives each
    parameter's PostgreSQL type (``"int8"``, ``"bytea[]"`` …): declared at
    prepare time, so the server never has to infer them.
    """
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        return f"${numbers.setdefault(match.group(1), len(numbers) + 1)}"

    numbered = _PLACEHOLDER.sub(number, sql)
    parameters = tuple(numbers)
    oids = tuple(_oid(types_by_name[p]) for p in parameters)
    return Statement(f"oblivio_{next(_NAMES)}".encode(), numbered.encode(), parameters, oids)


def _oid(type_name: str) -> int:
    if type_name.endswith("[]"):
        return types[type_name[:-2]].array_oid
    return types[type_name].oid


class PreparedStatements:
    """Which :class:`Statement` s each connection has prepared; runs them."""

    def __init__(self) -> None:
        self._prepared: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[bytes]]
        self._prepared = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def execute(
        self, driver: psycopg.Connection[Any], stmt: Statement, values: Mapping[str, bytes]
    ) -> PGresult:
        """Run ``stmt`` with binary ``values`` (by parameter name); the result holds rows.

        The caller holds ``driver`` alone for the call (the autocommit pool
        lends each connection to one borrower).
        """
        with self._lock:
            prepared = self._prepared.setdefault(driver, set())
        params = [values[p] for p in stmt.parameters]
        formats = [_BINARY] * len(params)
        if stmt.name in prepared:
            result = driver.pgconn.exec_prepared(stmt.name, params, formats, _BINARY)
            if result.error_field(DiagnosticField.SQLSTATE) != _UNKNOWN_STATEMENT:
                return _check(driver, result)
            # The session lost its prepared statements (DEALLOCATE ALL or
            # DISCARD ALL, which psycopg itself sends after some commands).
            # The statement was refused before it ran, so it runs again.
            prepared.clear()
        _check(driver, driver.pgconn.prepare(stmt.name, stmt.sql, stmt.oids))
        prepared.add(stmt.name)
        result = driver.pgconn.exec_prepared(stmt.name, params, formats, _BINARY)
        return _check(driver, result)


def _check(driver: psycopg.Connection[Any], result: PGresult) -> PGresult:
    if result.status in (ExecStatus.TUPLES_OK, ExecStatus.COMMAND_OK):
        return result
    if driver.pgconn.status == ConnStatus.BAD:
        # The socket is gone: psycopg's wait loop raises OperationalError
        # here, the retryable error, and the connection now reports closed.
        raise psycopg.OperationalError(result.get_error_message("utf-8"))
    raise psycopg.errors.error_from_result(result, driver.info.encoding)


def tuple_rows(driver: psycopg.Connection[Any], result: PGresult) -> list[tuple[Any, ...]]:
    """Every row of ``result`` as a tuple, each value loaded as a cursor would load it.

    psycopg's own loaders (in C) through its :class:`~psycopg.adapt.Transformer`,
    the object its cursors use: the same Python values as ``cursor.fetchall()``,
    for results of statements run here.
    """
    transformer = Transformer.from_context(driver)
    transformer.set_pgresult(result)
    return transformer.load_rows(0, result.ntuples, tuple)


def int8_rows(result: PGresult) -> list[tuple[int, ...]]:
    """Every row of a result whose columns are all ``bigint`` (binary, never NULL)."""
    value = result.get_value
    unpack = _INT8.unpack
    columns = range(result.nfields)
    return [
        tuple([unpack(value(row, col))[0] for col in columns])  # type: ignore[arg-type]
        for row in range(result.ntuples)
    ]
