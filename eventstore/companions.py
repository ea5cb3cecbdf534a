"""Companion rows: rows of other tables that land with an append, or not at all.

An inline projection must commit together with the events it derives from.
Under the stream lock that is simply one transaction.  The optimistic append
(:mod:`eventstore.heads`) has no transaction to share: it is one conditional
statement.  A caller that can derive its rows from the events alone, without
reading anything, hands the append a :data:`Companions` callback instead.  The
append calls it once the events are sealed, with the stream's cipher and the
events as they will be recorded; the backend writes the rows it returns under
the same condition as the events (see ``insert_events`` of each backend).  When
the condition fails, neither the events nor any companion row is written.

The log stays unaware of what the rows mean: it only learns a table and
complete rows (every column named) of plain values, which it binds with the
table's own column types.  Personal values must already be sealed with the
cipher it passed, which is the stream's data key.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

from eventstore.codec import SubjectCipher
from eventstore.model import StreamRef


@dataclass(frozen=True)
class PendingEvent:
    """An event sealed for the append, before the database gave it a position."""

    event_id: uuid.UUID
    stream: StreamRef
    version: int
    type: str
    recorded_at: datetime
    data: dict[str, Any]
    metadata: dict[str, Any]


@dataclass(frozen=True)
class CompanionRows:
    """Complete rows for one table, written only if the append they ride with is."""

    table: sa.Table
    rows: Sequence[Mapping[str, Any]]


#: Derives the companion rows of a batch from the stream's cipher and its events.
Companions = Callable[[SubjectCipher, Sequence[PendingEvent]], Sequence[CompanionRows]]


def bound_row(
    table: sa.Table, row: Mapping[str, Any], dialect: Dialect, prefix: str = ""
) -> dict[str, Any]:
    """One row as the driver takes it: each value through its column's bind processor.

    The backends send companion rows on the driver's cursor, past
    SQLAlchemy's own parameter processing, so they apply it here: a
    ``UTCDateTime`` becomes naive UTC, a UUID on SQLite its 32 hex digits,
    exactly as SQLAlchemy would write them.  The names get ``prefix``.
    Raises ``ValueError`` for a row that does not name exactly the table's
    columns.
    """
    processors = _processors(table, dialect)
    if row.keys() != processors.keys():
        raise ValueError(f"a companion row of {table.name} must name exactly its columns")
    bound = {}
    for name, process in processors.items():
        value = row[name]
        bound[prefix + name] = value if process is None or value is None else process(value)
    return bound


@functools.cache
def _processors(table: sa.Table, dialect: Dialect) -> dict[str, Callable[[Any], Any] | None]:
    # Cached per table and dialect instance (one per engine): building a
    # processor costs more than applying it.
    return {c.name: c.type.dialect_impl(dialect).bind_processor(dialect) for c in table.c}
