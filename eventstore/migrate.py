"""Schema migrations (Alembic), run programmatically.

Each package that owns tables keeps its own Alembic branch in its own
``migrations/versions`` folder; the composition root passes all of them so
``upgrade heads`` brings every branch up to date.  The eventstore itself
knows only its own branch, keeping the dependency direction intact.

Alembic is imported only when there is something to do: importing it costs
about 0.4 s, and the embedded store checks its schema on every open, so a
command line tool that opens an up-to-date store (``oblivio keys list``) would
spend most of its time on it.  Whether there is anything to do is read from
the revision ids the migration scripts declare and the ``alembic_version``
table (``pending``); ``tests/test_migrations.py`` checks that this agrees with
Alembic's own view of the heads.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from eventstore.schema import ONLY_ON
from eventstore.schema import metadata as eventstore_metadata

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Alembic's bookkeeping table, as Alembic creates it (one row per applied head).
_VERSIONS = sa.table("alembic_version", sa.column("version_num", sa.String))
#: Where a script's first top-level definition starts.  Alembic's scripts declare
#: their ids above it, so only that header needs parsing.
_FIRST_DEFINITION = re.compile(r"^(?:(?:async\s+)?def\s|class\s|@)", re.MULTILINE)


def _config(
    conn: sa.Connection, version_locations: Sequence[Path], metadatas: Sequence[sa.MetaData]
) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    locations = [MIGRATIONS_DIR / "versions", *version_locations]
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("version_locations", ":".join(str(p) for p in locations))
    cfg.attributes["connection"] = conn
    cfg.attributes["target_metadata"] = [eventstore_metadata, *metadatas]
    return cfg


@dataclass(frozen=True)
class SchemaUpgrade:
    """The head revisions a database was at before ``upgrade`` and is at after it
    (none before: it had no schema)."""

    before: frozenset[str]
    after: frozenset[str]

    def describe(self) -> str:
        """What was done, in a sentence: created, upgraded, or nothing to do."""
        if not self.before:
            return f"created the schema at revision {_revisions(self.after)}"
        if self.before == self.after:
            return f"the schema is already at revision {_revisions(self.after)}"
        before, after = _revisions(self.before), _revisions(self.after)
        return f"upgraded the schema from revision {before} to {after}"


def _revisions(heads: frozenset[str]) -> str:
    return ", ".join(sorted(heads))


def upgrade(
    engine: Engine, version_locations: Sequence[Path] = (), metadatas: Sequence[sa.MetaData] = ()
) -> SchemaUpgrade:
    """Bring every migration branch to its head (at once when it is there already)."""
    before = applied_revisions(engine)
    if not lacks_migrations(before, version_locations):
        return SchemaUpgrade(before, before)
    from alembic import command

    with engine.begin() as conn:
        command.upgrade(_config(conn, version_locations, metadatas), "heads")
    return SchemaUpgrade(before, applied_revisions(engine))


def pending(engine: Engine, version_locations: Sequence[Path] = ()) -> bool:
    """Whether the database lacks a migration (or has no version table yet)."""
    return lacks_migrations(applied_revisions(engine), version_locations)


def lacks_migrations(applied: frozenset[str], version_locations: Sequence[Path] = ()) -> bool:
    """Whether a database at the ``applied`` revisions lacks a migration."""
    return applied != script_heads([MIGRATIONS_DIR / "versions", *version_locations])


def applied_revisions(engine: Engine) -> frozenset[str]:
    """The head revisions Alembic recorded as applied (none: never migrated)."""
    try:
        with engine.connect() as conn:
            return frozenset(conn.execute(sa.select(_VERSIONS.c.version_num)).scalars())
    except sa.exc.DBAPIError:  # no version table: never migrated
        return frozenset()


def script_heads(locations: Iterable[Path]) -> set[str]:
    """The revisions Alembic's version table holds once the scripts in ``locations``
    are all applied: those no other revises or ``depends_on``.

    A revision another branch's script depends on leaves the version table when
    that script is applied (as a merge's parents do), unless its own branch goes on.
    """
    revisions: set[str] = set()
    revised: set[str] = set()
    for script in (path for location in locations for path in location.glob("*.py")):
        declared = _declared(script)
        if "revision" not in declared:
            continue  # __init__.py
        revisions.add(declared["revision"])
        for parents in (declared.get("down_revision"), declared.get("depends_on")):
            revised.update((parents,) if isinstance(parents, str) else parents or ())
    return revisions - revised


def _declared(script: Path) -> dict[str, Any]:
    """The literal ids (``revision``, ``down_revision``, ``depends_on``) a script
    assigns at module level.

    Parsing a whole script, migration code and all, was most of the time an
    up-to-date store takes to open; so only the header above its first top-level
    definition is parsed.  A script that names an id below the header, or
    whose header does not parse alone (the cut fell inside a string), is parsed
    whole, so the answer is the same either way.
    """
    text = script.read_text()
    cut = _FIRST_DEFINITION.search(text)
    if cut is not None and all(text.find(name, cut.start()) == -1 for name in _IDS):
        try:
            return _assigned_ids(text[: cut.start()])
        except SyntaxError:
            pass
    return _assigned_ids(text)


#: The ids a script declares for Alembic.
_IDS = ("revision", "down_revision", "depends_on")


def _assigned_ids(source: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in _IDS:
                found[target.id] = ast.literal_eval(node.value)
    return found


def schema_differences(engine: Engine, metadatas: Sequence[sa.MetaData] = ()) -> list[Any]:
    """What the database lacks or has beyond the models (empty when they match)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

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
