"""The storage port: what the log needs of a database, named by capability.

Everything else in ``eventstore`` is written once against SQLAlchemy Core and
this interface.  Each backend (``eventstore.backends.sqlite`` and
``eventstore.backends.postgres``) implements it in one module, with a comment
at each method saying why its database needs what it does.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.dml import Insert

from eventstore.batch import DerivedRows, Placement, SealedBatch


class Backend(abc.ABC):
    """One database under the log: connections, the append, the global order, errors."""

    #: ``"sqlite"``, ``"postgresql"`` or ``"citus"``, as the health route reports it.
    name: str
    #: True when one process owns the database file (SQLite).
    embedded: bool
    #: The log's global order, as ORDER BY columns its index serves.
    log_order: tuple[sa.ColumnElement[Any], ...]

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @abc.abstractmethod
    def write_connection(self, *, durable: bool = True) -> AbstractContextManager[Connection]:
        """A connection whose transaction may write, begun so that writers serialise correctly.

        ``durable=False``: its commit need not wait for stable storage (see
        :meth:`eventstore.EventStore.transaction`).
        """

    @abc.abstractmethod
    def read_connection(self) -> AbstractContextManager[Connection]:
        """A connection for reads that share one snapshot and never block writers."""

    @abc.abstractmethod
    def statement_reads(self) -> AbstractContextManager[Connection]:
        """A connection for reads whose statements need no common snapshot."""

    def fetch(
        self, conn: Connection, query: sa.Select[Any], params: dict[str, Any]
    ) -> list[Sequence[Any]]:
        """The rows of a hot read, as tuples in the query's column order, in a new
        list the caller owns (decoding consumes it).

        ``query`` is built once and takes its values only from ``params``
        (bound parameters, no expanding ones); datetimes come back UTC-aware.
        """
        return list(conn.execute(query, params))

    def write_at_commit(self, conn: Connection, statement: Any, params: dict[str, Any]) -> None:
        """Run ``statement`` (a write built once, whose result nobody reads) in the
        transaction of ``conn``, at the latest when it commits.

        Everything the transaction does afterwards must not depend on it: on a server
        database it goes out with the ``COMMIT``, one wait for both.
        """
        conn.execute(statement, params)

    def insert_before_next(self, conn: Connection, insert: Insert, row: Mapping[str, Any]) -> None:
        """Insert ``row`` with ``insert`` (built once) in the transaction of ``conn``,
        at the latest with its next statement, or its COMMIT if none follows.

        Nothing before that statement may depend on it: on a server database it goes
        out with that statement (in one simple query, or in the append's pipeline),
        one wait for both."""
        conn.execute(insert, [dict(row)])

    @abc.abstractmethod
    def insert_unless_present(self, table: sa.Table) -> Insert:
        """``INSERT`` into ``table`` that skips rows whose unique key exists already."""

    @abc.abstractmethod
    def append(
        self,
        conn: Connection,
        batch: SealedBatch,
        derived: Sequence[DerivedRows],
        *,
        last: bool = False,
    ) -> Sequence[Placement] | None:
        """Move the stream head, insert the batch's rows and the ``derived`` rows (the
        inline projection's), or write nothing at all.

        ``last``: nothing follows the append in the transaction of ``conn`` but its
        commit, which a backend may then send with the append (on a server, one wait
        for both instead of two) when that commits nothing the append refused; the
        caller's commit afterwards finds the transaction ended and sends nothing.

        Writes only if the stream head is still at ``batch.old_version``, the
        stream is open with its data key alive, and processing of its subject
        is not restricted unless ``batch.past_restriction``; returns the rows'
        placements in version order, or ``None`` otherwise.  A backend that
        cannot make the derived rows conditional in the statement itself writes
        them anyway and returns ``None``: the caller then rolls back (see
        :meth:`append_connection`).  A duplicate caller-chosen event id raises
        :class:`~eventstore.errors.ConflictError`.
        """

    @abc.abstractmethod
    def append_connection(self) -> AbstractContextManager[Connection]:
        """A connection for one :meth:`append` that commits on its own, durably, with
        no lock taken first: an append at a head the caller remembers, whose
        condition is its only guard.  The block commits when it ends and rolls back
        when it raises (the caller raises when the append returned ``None``)."""

    @abc.abstractmethod
    def after_cursor(self) -> sa.ColumnElement[bool]:
        """Log rows after the cursor (parameters ``group``, ``position``) that a reader
        may deliver now, without risking a later commit landing before them.

        Parameter ``settled``: a commit group below which the caller knows every
        writer had ended (one past the highest one an earlier read showed).
        """

    def log_params(self, conn: Connection, cursor: Mapping[str, Any]) -> dict[str, Any]:
        """Parameters of :meth:`after_cursor` that must be read on ``conn`` just before
        each log read (none, unless the horizon cannot be part of the read itself);
        ``cursor`` holds the read's own (``group``, ``position``, ``settled``)."""
        return {}

    @abc.abstractmethod
    def one_of(self, column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
        """``column`` equals a value of the list parameter ``name``, in a form
        :meth:`fetch` takes (a statement built once, whatever the list's length)."""

    @abc.abstractmethod
    def translate_errors(self) -> AbstractContextManager[None]:
        """Re-raise driver errors as the log's error tree (``raise … from e``)."""

    def dispose(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()


def head_params(batch: SealedBatch) -> dict[str, Any]:
    """Parameters of the conditional head move: from ``old_version`` to the batch's end
    (``past_restriction``: even if the subject's processing is restricted)."""
    return {
        "stream_id": batch.stream.stream_id,
        "old_version": batch.old_version,
        "new_version": batch.new_version,
        "chain_hash": batch.chain_hash,
        "past_restriction": batch.past_restriction,
    }
