"""Memory projections: the node graph (inline) and the vector state (asynchronous).

Both are functions of the log.  The node graph is applied in the same
transaction as each append, so commands validate against current state and
callers read their own writes; the vector state is applied after commit by
workers that keep their own checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from projections.storage.tables import metadata

#: This package's Alembic branch, for the composition root's migrations.
MIGRATIONS = Path(__file__).parent / "migrations" / "versions"

__all__ = ["MIGRATIONS", "metadata"]
