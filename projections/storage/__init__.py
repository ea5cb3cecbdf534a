"""SQL for the projections: their tables and the statements that read and write them.

This is the only part of ``projections`` that speaks SQLAlchemy.
"""

from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.engine import Connection

#: How a hot statement runs (``eventstore.Backend.fetch``): built once with bound
#: parameters, compiled once, its rows as tuples in the statement's column order.  On
#: PostgreSQL it skips SQLAlchemy's execution (the cache key it computes on every call
#: cost more CPU than many of these statements), and a transaction's first one goes out
#: with its BEGIN.  The statement is typed ``Any``: a ``SELECT`` or an ``UPDATE …
#: RETURNING``.
Fetch = Callable[[Connection, Any, dict[str, Any]], list[Sequence[Any]]]


def execute(conn: Connection, statement: Any, params: dict[str, Any]) -> list[Sequence[Any]]:
    """A :data:`Fetch` through SQLAlchemy, for callers that hold no backend."""
    return list(conn.execute(statement, params))


#: How a write whose result nobody reads joins its transaction
#: (``eventstore.Backend.write_at_commit``): on PostgreSQL with the ``COMMIT``.
WriteAtCommit = Callable[[Connection, Any, dict[str, Any]], None]
