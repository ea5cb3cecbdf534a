"""The port every database backend implements: only what truly differs.

Each backend module (``sqlite``, ``postgres``) implements this once, with a
comment at each method saying why its dialect needs what it does.  The rest
of the log is written once against SQLAlchemy Core and this interface.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.dml import Insert

from eventstore.errors import OperationalError
from eventstore.model import LogCursor
from eventstore.schema import events, streams


class Backend(abc.ABC):
    """Dialect-specific behaviour of the log."""

    name: str
    #: True when one process owns the database file (SQLite).
    embedded: bool

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @abc.abstractmethod
    def write_connection(self) -> AbstractContextManager[Connection]:
        """A connection whose transaction may write, begun so that writers serialise correctly."""

    @abc.abstractmethod
    def read_connection(self) -> AbstractContextManager[Connection]:
        """A connection for consistent reads that never blocks writers."""

    def statement_connection(self) -> AbstractContextManager[Connection]:
        """A connection for one read statement, which is a consistent snapshot on its own."""
        return self.read_connection()

    @abc.abstractmethod
    def insert_ignoring_duplicates(self, table: sa.Table) -> Insert:
        """``INSERT … ON CONFLICT DO NOTHING`` for ``table``."""

    @abc.abstractmethod
    def commit_group(self) -> sa.ColumnElement[int]:
        """The first half of the global order, evaluated by the writing transaction."""

    @abc.abstractmethod
    def after_cursor(
        self, group: sa.ColumnElement[int], position: sa.ColumnElement[int], cursor: LogCursor
    ) -> sa.ColumnElement[bool]:
        """Rows strictly after ``cursor`` in the global order, in a form the index serves."""

    def insert_events(
        self,
        conn: Connection,
        rows: Sequence[dict[str, Any]],
        stream_id: int,
        old_version: int,
        chain_hash: bytes,
    ) -> list[sa.Row[Any]]:
        """Insert event rows and move the stream head; the (position, commit_group) rows.

        An executemany INSERT (SQLAlchemy batches it into multi-row statements
        and returns rows in parameter order), then the head update.
        PostgreSQL overrides the single-event case to do both in one statement.
        """
        returned = conn.execute(self._insert_many, list(rows)).all()
        moved = conn.execute(_move_head, head_params(stream_id, old_version, len(rows), chain_hash))
        if moved.rowcount != 1:  # the stream row lock makes this unreachable
            raise OperationalError("stream head moved during the append; retry")
        return list(returned)

    @functools.cached_property
    def _insert_many(self) -> Insert:
        return (
            events.insert()
            .values(commit_group=self.commit_group())
            .returning(events.c.position, events.c.commit_group, sort_by_parameter_order=True)
        )

    @functools.cached_property
    def single_insert(self) -> Insert:
        """One event row with named parameters, built once so it compiles once.

        Parameters are prefixed: an UPDATE of ``streams`` in the same statement
        would otherwise take same-named parameters (``version``…) as SET values.
        """
        values = {c: sa.bindparam(f"ev_{c}", type_=events.c[c].type) for c in EVENT_COLUMNS}
        return (
            events.insert()
            .values(**values, commit_group=self.commit_group())
            .returning(events.c.position, events.c.commit_group)
        )

    @abc.abstractmethod
    def visible_commit_groups(self, column: sa.ColumnElement[int]) -> sa.ColumnElement[bool]:
        """Rows a reader may deliver now without risking a later commit landing before them."""

    @abc.abstractmethod
    def translate_errors(self) -> AbstractContextManager[None]:
        """Re-raise driver errors as the log's error tree (``raise … from e``)."""

    def dispose(self) -> None:
        self.engine.dispose()


EVENT_COLUMNS = (
    "event_id",
    "stream_id",
    "version",
    "type",
    "schema_version",
    "recorded_at",
    "payload",
    "metadata",
    "digest",
    "chain_hash",
)

_move_head = (
    streams.update()
    .where(
        streams.c.stream_id == sa.bindparam("head_stream_id", type_=streams.c.stream_id.type),
        streams.c.version == sa.bindparam("head_old_version", type_=sa.BigInteger()),
    )
    .values(
        version=sa.bindparam("head_new_version", type_=sa.BigInteger()),
        chain_hash=sa.bindparam("head_chain", type_=sa.LargeBinary()),
    )
)


def single_row_params(row: dict[str, Any]) -> dict[str, Any]:
    return {f"ev_{c}": row[c] for c in EVENT_COLUMNS}


def head_params(stream_id: int, old_version: int, added: int, chain: bytes) -> dict[str, Any]:
    return {
        "head_stream_id": stream_id,
        "head_old_version": old_version,
        "head_new_version": old_version + added,
        "head_chain": chain,
    }
