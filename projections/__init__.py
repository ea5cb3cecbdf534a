"""Memory projections: the node graph (inline) and the vector state (asynchronous).

Both are functions of the log.  The node graph is applied in the same
transaction as each append, so commands validate against current state and
callers read their own writes; the vector state is applied after commit by
workers that keep their own checkpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from projections.storage.tables import metadata

#: This package's Alembic branch, for the composition root's migrations.
MIGRATIONS = Path(__file__).parent / "migrations" / "versions"

__all__ = ["MIGRATIONS", "metadata"]


def __getattr__(name: str) -> Any:
    # The tables are imported on first use (PEP 562): a process that opens an
    # up-to-date store checks its schema with ``MIGRATIONS`` alone, and a CLI
    # command that reads only the log (``oblivio keys list``) never needs them.
    if name == "metadata":
        from projections.storage.tables import metadata

        return metadata
    raise AttributeError(f"module 'projections' has no attribute {name!r}")
