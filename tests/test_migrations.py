"""Migrations produce exactly the schema the models describe, on both backends."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic.config import Config

import projections
from eventstore import create_backend
from eventstore.migrate import (
    MIGRATIONS_DIR,
    pending,
    schema_differences,
    script_heads,
    upgrade,
)


def test_migrations_equal_the_models(any_database_url: str) -> None:
    backend = create_backend(any_database_url)
    try:
        assert schema_differences(backend.engine, [projections.metadata]) == []
    finally:
        backend.dispose()


def test_a_model_change_without_a_migration_is_noticed(any_database_url: str) -> None:
    extra = sa.MetaData()
    sa.Table("not_migrated", extra, sa.Column("id", sa.Integer, primary_key=True))
    backend = create_backend(any_database_url)
    try:
        differences = schema_differences(backend.engine, [projections.metadata, extra])
    finally:
        backend.dispose()
    assert [d[0] for d in differences] == ["add_table"]


def test_events_reference_streams_by_foreign_key_on_sqlite_only(any_database_url: str) -> None:
    # PostgreSQL inserts events only FROM the stream row the same statement
    # moved (eventstore.backends.postgres), so its foreign key was dropped (es0003);
    # the comparison above cannot see an extra one, so this looks directly.
    backend = create_backend(any_database_url)
    try:
        keys = sa.inspect(backend.engine).get_foreign_keys("events")
        dialect = backend.engine.dialect.name
    finally:
        backend.dispose()
    referred = [(k["referred_table"], k["constrained_columns"]) for k in keys]
    assert referred == ([("streams", ["stream_id"])] if dialect == "sqlite" else [])


LOCATIONS = [MIGRATIONS_DIR / "versions", projections.MIGRATIONS]


def test_the_heads_read_from_the_scripts_are_alembics_heads() -> None:
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", ":".join(str(p) for p in LOCATIONS))
    alembic_heads = set(ScriptDirectory.from_config(config).get_heads())
    assert script_heads(LOCATIONS) == alembic_heads
    assert {head[:2] for head in alembic_heads} == {"es", "pj"}  # both packages' branches


def test_an_up_to_date_schema_has_nothing_pending(any_database_url: str) -> None:
    backend = create_backend(any_database_url)
    try:
        assert not pending(backend.engine, [projections.MIGRATIONS])
        # Without the projections' branch, its head in the database is unknown to the scripts.
        assert pending(backend.engine)
        with backend.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM alembic_version WHERE version_num LIKE 'pj%'"))
        assert pending(backend.engine, [projections.MIGRATIONS])
    finally:
        backend.dispose()


def test_a_new_database_is_pending_and_upgrade_brings_it_to_the_heads(tmp_path: Path) -> None:
    backend = create_backend(f"sqlite:///{tmp_path / 'fresh.sqlite3'}")
    try:
        assert pending(backend.engine, [projections.MIGRATIONS])
        upgrade(backend.engine, [projections.MIGRATIONS], [projections.metadata])
        assert not pending(backend.engine, [projections.MIGRATIONS])
        assert schema_differences(backend.engine, [projections.metadata]) == []
    finally:
        backend.dispose()


def test_db_upgrade_says_what_it_did(tmp_path: Path) -> None:
    """``oblivio db upgrade``: created the schema, upgraded it from A to B, or nothing to do."""
    from alembic import command
    from click.testing import CliRunner

    from eventstore.migrate import _config
    from oblivio.cli import main

    def db_upgrade() -> str:
        result = CliRunner().invoke(main, ["--data-dir", str(tmp_path), "db", "upgrade"])
        assert result.exit_code == 0, result.output
        return result.output

    heads = ", ".join(sorted(script_heads(LOCATIONS)))
    assert db_upgrade().startswith(f"created the schema at revision {heads} (sqlite:///")
    assert db_upgrade().startswith(f"the schema is already at revision {heads} (")

    backend = create_backend(f"sqlite:///{tmp_path / 'oblivio.sqlite3'}")
    try:
        with backend.engine.begin() as conn:
            command.downgrade(_config(conn, [projections.MIGRATIONS], []), "pj0007")
        # Whatever the projections' head is now, it went back to pj0007.
        others = [h for h in script_heads(LOCATIONS) if not h.startswith("pj")]
        older = ", ".join(sorted([*others, "pj0007"]))
    finally:
        backend.dispose()
    said = db_upgrade()
    assert said.startswith(f"upgraded the schema from revision {older} to {heads} ("), said


def test_a_script_with_two_parents_revises_both(tmp_path: Path) -> None:
    for name, body in (
        ("a.py", 'revision = "a"\ndown_revision = None\n'),
        ("b.py", 'revision = "b"\ndown_revision = "a"\n'),
        ("c.py", 'revision = "c"\ndown_revision = "a"\n'),
        ("m.py", 'revision = "m"\ndown_revision = ("b", "c")\n'),
        ("__init__.py", ""),
    ):
        (tmp_path / name).write_text(body)
    assert script_heads([tmp_path]) == {"m"}


def test_the_ids_are_read_from_a_scripts_header_or_else_from_all_of_it(tmp_path: Path) -> None:
    # eventstore.migrate parses only what comes before the first definition unless
    # that could give another answer than parsing the whole script.
    for name, body in (
        ("a.py", 'revision = "a"\ndown_revision = None\n\n\ndef upgrade() -> None:\n    pass\n'),
        # A docstring with a line that looks like a definition: the cut falls inside it.
        ("b.py", '"""Text\ndef not_code\n"""\nrevision = "b"\ndown_revision = "a"\n'),
        # An id assigned again below a definition: the last assignment counts.
        ("c.py", 'revision = "old"\n\n\ndef upgrade() -> None:\n    pass\n\n\nrevision = "c"\n'),
        ("d.py", '@decorated\ndef f() -> None:\n    pass\n\n\nrevision = "d"\ndown_revision = "c"'),
        # The cut falls inside a string below the ids: the header alone does not parse.
        ("e.py", 'revision = "e"\ndown_revision = "d"\nX = """\ndef not_code\n"""\n'),
        ("__init__.py", ""),
    ):
        (tmp_path / name).write_text(body)
    assert script_heads([tmp_path]) == {"b", "e"}
