"""Schema migrations (Alembic), run programmatically.

Each package that owns tables keeps its own Alembic branch in its own
``migrations/versions`` folder; the composition root passes all of them so
``upgrade heads`` brings every branch up to date.  The eventstore itself
knows only its own branch, keeping the dependency direction intact.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Engine

from eventstore.schema import ONLY_ON
from eventstore.schema import metadata as eventstore_metadata

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def _config(
    conn: sa.Connection, version_locations: Sequence[Path], metadatas: Sequence[sa.MetaData]
) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    locations = [MIGRATIONS_DIR / "versions", *version_locations]
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", ":".join(str(p) for p in locations))
    cfg.attributes["connection"] = conn
    cfg.attributes["target_metadata"] = [eventstore_metadata, *metadatas]
    return cfg


def upgrade(
    engine: Engine, version_locations: Sequence[Path] = (), metadatas: Sequence[sa.MetaData] = ()
) -> None:
    """Bring every migration branch to its head."""
    with engine.begin() as conn:
        command.upgrade(_config(conn, version_locations, metadatas), "heads")


def schema_differences(engine: Engine, metadatas: Sequence[sa.MetaData] = ()) -> list[Any]:
    """What the database lacks or has beyond the models (empty when they match)."""
    with engine.connect() as conn:
        dialect = conn.dialect.name

        def on_this_dialect(item: Any, _name: Any, _type: Any, _reflected: Any, _to: Any) -> bool:
            only_on = getattr(item, "info", {}).get(ONLY_ON)
            return only_on is None or only_on == dialect

        opts = {"compare_type": True, "include_object": on_this_dialect}
        context = MigrationContext.configure(conn, opts=opts)
        # compare_metadata accepts a sequence: every package's tables at once.
        target: Any = [eventstore_metadata, *metadatas]
        return list(compare_metadata(context, target))
