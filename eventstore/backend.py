"""The port every database backend implements: only what truly differs.

Each backend module (``sqlite``, ``postgres``) implements this once, with a
comment at each method saying why its dialect needs what it does.  The rest
of the log is written once against SQLAlchemy Core and this interface.
"""

from __future__ import annotations

import abc
from contextlib import AbstractContextManager

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.dml import Insert

from eventstore.model import LogCursor


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

    @abc.abstractmethod
    def visible_commit_groups(self, column: sa.ColumnElement[int]) -> sa.ColumnElement[bool]:
        """Rows a reader may deliver now without risking a later commit landing before them."""

    @abc.abstractmethod
    def translate_errors(self) -> AbstractContextManager[None]:
        """Re-raise driver errors as the log's error tree (``raise … from e``)."""

    def dispose(self) -> None:
        self.engine.dispose()
