"""Migrations produce exactly the schema the models describe, on both backends."""

from __future__ import annotations

import uuid
from pathlib import Path

import sqlalchemy as sa
from alembic.config import Config

from eventstore import create_backend
from eventstore.migrate import (
    MIGRATIONS_DIR,
    applied_revisions,
    pending,
    schema_differences,
    script_heads,
    upgrade,
)
from oblivio.bootstrap import migration_locations, table_metadatas

BRANCHES = migration_locations()
TABLES = table_metadatas()


def test_migrations_equal_the_models(any_database_url: str) -> None:
    backend = create_backend(any_database_url)
    try:
        assert schema_differences(backend.engine, TABLES) == []
    finally:
        backend.dispose()


def test_a_model_change_without_a_migration_is_noticed(any_database_url: str) -> None:
    extra = sa.MetaData()
    sa.Table("not_migrated", extra, sa.Column("id", sa.Integer, primary_key=True))
    backend = create_backend(any_database_url)
    try:
        differences = schema_differences(backend.engine, [*TABLES, extra])
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


LOCATIONS = [MIGRATIONS_DIR / "versions", *BRANCHES]


def test_the_heads_read_from_the_scripts_are_what_alembic_records(tmp_path: Path) -> None:
    """The heads the scripts give are the rows Alembic's version table holds after an
    upgrade: a revision another branch depends on is not among them."""
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    config.set_main_option("version_locations", ":".join(str(p) for p in LOCATIONS))
    alembic_heads = set(ScriptDirectory.from_config(config).get_heads())
    backend = create_backend(f"sqlite:///{tmp_path / 'fresh.sqlite3'}")
    try:
        recorded = upgrade(backend.engine, BRANCHES, TABLES).after
    finally:
        backend.dispose()
    assert script_heads(LOCATIONS) == recorded
    assert recorded <= alembic_heads  # Alembic's heads also name depended-on revisions
    assert {head[:2] for head in alembic_heads} == {"es", "pj", "ap"}  # every package's branch


def test_a_revision_another_branch_depends_on_is_no_head(tmp_path: Path) -> None:
    for name, body in (
        ("a.py", 'revision = "a"\ndown_revision = None\n'),
        ("b.py", 'revision = "b"\ndown_revision = None\ndepends_on = "a"\n'),
        ("c.py", 'revision = "c"\ndown_revision = None\ndepends_on = ("b",)\n'),
        ("__init__.py", ""),
    ):
        (tmp_path / name).write_text(body)
    assert script_heads([tmp_path]) == {"c"}


def test_an_up_to_date_schema_has_nothing_pending(any_database_url: str) -> None:
    backend = create_backend(any_database_url)
    try:
        assert not pending(backend.engine, BRANCHES)
        # Without the other branches, their heads in the database are unknown to the scripts.
        assert pending(backend.engine)
        with backend.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM alembic_version WHERE version_num LIKE 'pj%'"))
        assert pending(backend.engine, BRANCHES)
    finally:
        backend.dispose()


def test_a_new_database_is_pending_and_upgrade_brings_it_to_the_heads(tmp_path: Path) -> None:
    backend = create_backend(f"sqlite:///{tmp_path / 'fresh.sqlite3'}")
    try:
        assert pending(backend.engine, BRANCHES)
        upgrade(backend.engine, BRANCHES, TABLES)
        assert not pending(backend.engine, BRANCHES)
        assert schema_differences(backend.engine, TABLES) == []
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
            command.downgrade(_config(conn, BRANCHES, []), "pj0007")
        older = ", ".join(sorted(applied_revisions(backend.engine)))
        assert "pj0007" in older
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


def test_an_older_database_keeps_its_keys_and_sessions_when_appdata_adopts_them(
    any_database_url: str,
) -> None:
    """A database made before ``ap0001`` (its API keys and console sessions created
    by the log's branch) keeps every row when upgraded; the schema then equals the models."""
    from alembic import command

    from appdata import apikeys, console_sessions
    from eventstore.migrate import _config
    from eventstore.store import utc_now
    from oblivio.bootstrap import upgrade_schema

    backend = create_backend(any_database_url)
    try:
        with backend.engine.begin() as conn:
            command.downgrade(_config(conn, BRANCHES, []), "appdata@base")
        assert "ap0001" not in applied_revisions(backend.engine)
        with backend.engine.begin() as conn:
            key, _ = apikeys.issue(conn, "operator", None, None, utc_now(), namespace="default")
            who = apikeys.Principal(key.key_id, "operator", None, namespace="default")
            token = console_sessions.open_session(conn, who, utc_now())

        upgraded = upgrade_schema(backend.engine)
        assert upgraded.after - upgraded.before  # the appdata branch, to its head
        assert schema_differences(backend.engine, TABLES) == []
        with backend.engine.connect() as conn:
            assert key in apikeys.list_keys(conn, apikeys.ALL_NAMESPACES)
            found = console_sessions.find(conn, token)
            assert found is not None
            assert found.principal == who
    finally:
        backend.dispose()


def test_re_embedding_units_move_to_the_one_table_of_leased_work(any_database_url: str) -> None:
    """A database whose re-embedding units were in ``vector_rebuild_subjects`` (before
    pj0009) finds them as ``reembed`` work in ``rebuild_jobs``, lease state and
    progress kept, and claims the one still queued."""
    from datetime import datetime, timedelta

    from alembic import command

    from eventstore.migrate import _config
    from eventstore.store import utc_now
    from oblivio.bootstrap import upgrade_schema
    from projections.storage import vector_rebuilds

    rebuild_id, started = uuid.uuid4(), datetime(2030, 1, 1)
    job = sa.table(
        "vector_rebuilds",
        *(sa.column(n) for n in ("embedder", "scope", "status", "subjects_total", "nodes_total")),
        sa.column("rebuild_id", sa.Uuid()),
        sa.column("created_at", sa.DateTime()),
    )
    units = sa.table(
        "vector_rebuild_subjects",
        *(sa.column(n) for n in ("stream_id", "status", "attempts", "nodes_embedded")),
        sa.column("rebuild_id", sa.Uuid()),
        sa.column("finished_at", sa.DateTime()),
    )
    backend = create_backend(any_database_url)
    try:
        with backend.engine.begin() as conn:
            command.downgrade(_config(conn, BRANCHES, []), "pj0008")
            command.downgrade(_config(conn, BRANCHES, []), "es0008")
            conn.execute(
                job.insert().values(
                    rebuild_id=rebuild_id,
                    embedder="hashing-v1-64",
                    scope="all",
                    status="running",
                    subjects_total=2,
                    nodes_total=9,
                    created_at=started,
                )
            )
            unit = {"rebuild_id": rebuild_id, "attempts": 1, "nodes_embedded": 7}
            conn.execute(
                units.insert(),
                [
                    {**unit, "stream_id": 1, "status": "done", "finished_at": started},
                    {**unit, "stream_id": 2, "status": "queued", "finished_at": None},
                ],
            )
        upgrade_schema(backend.engine)
        assert schema_differences(backend.engine, TABLES) == []
        with backend.engine.begin() as conn:
            progress = vector_rebuilds.read_progress(conn, rebuild_id)
            assert progress is not None
            assert (progress.subjects_done, progress.nodes_embedded) == (1, 14)
            claimed = vector_rebuilds.claim(conn, "w", utc_now(), timedelta(seconds=30))
            assert claimed is not None
            assert (claimed.kind, claimed.request_id, claimed.stream_id) == (
                "reembed",
                rebuild_id,
                2,
            )
            assert claimed.attempts == 2
    finally:
        backend.dispose()


def test_a_restriction_in_place_before_es0013_is_copied_onto_its_streams(
    any_database_url: str,
) -> None:
    """Every generation of a subject restricted before ``streams.restricted`` existed is
    flagged by the upgrade; other subjects' streams are not."""
    from datetime import datetime

    from alembic import command

    from eventstore.migrate import _config
    from oblivio.bootstrap import upgrade_schema

    restricted, free = b"r" * 32, b"f" * 32
    stream = sa.table(
        "streams",
        *(sa.column(n) for n in ("namespace", "subject_key", "generation", "version")),
        sa.column("chain_hash"),
        sa.column("created_at", sa.DateTime()),
    )
    register = sa.table(
        "subject_restrictions",
        *(sa.column(n) for n in ("namespace", "subject_key", "ground", "reference")),
        sa.column("restricted_at", sa.DateTime()),
    )
    at = datetime(2030, 1, 1)
    backend = create_backend(any_database_url)
    try:
        with backend.engine.begin() as conn:
            command.downgrade(_config(conn, BRANCHES, []), "es0012")
            for key, generation in ((restricted, 1), (restricted, 2), (free, 1)):
                row = {"namespace": "t", "subject_key": key, "generation": generation}
                conn.execute(
                    stream.insert(), row | {"version": 0, "chain_hash": b"0" * 32, "created_at": at}
                )
            conn.execute(
                register.insert(),
                {"namespace": "t", "subject_key": restricted, "ground": "art18-1-a"}
                | {"reference": "T-1", "restricted_at": at},
            )
        upgrade_schema(backend.engine)
        assert schema_differences(backend.engine, TABLES) == []
        with backend.engine.connect() as conn:
            flags = conn.execute(
                sa.text(
                    "SELECT subject_key, generation, restricted FROM streams WHERE namespace = 't'"
                    " ORDER BY subject_key, generation"
                )
            ).all()
    finally:
        backend.dispose()
    assert [(bytes(k), g, bool(r)) for k, g, r in flags] == [
        (free, 1, False),
        (restricted, 1, True),
        (restricted, 2, True),
    ]


def test_streams_before_es0014_get_their_directory_entries_and_ids_continue(
    any_database_url: str, tmp_path: Path
) -> None:
    """The upgrade copies every stream generation into the stream directory with its id;
    a subject's stream is then found there, and the next generation created takes an
    id after the copied ones."""
    from datetime import datetime

    from alembic import command

    from eventstore import EventStore, KeyringFile, NewEvent
    from eventstore.migrate import _config
    from eventstore.reader import LATEST_STREAM_ID, latest_stream_params
    from oblivio.bootstrap import upgrade_schema

    old, other = b"o" * 32, b"x" * 32
    stream = sa.table(
        "streams",
        *(sa.column(n) for n in ("stream_id", "namespace", "subject_key", "generation")),
        *(sa.column(n) for n in ("version", "chain_hash")),
        sa.column("created_at", sa.DateTime()),
    )
    at = datetime(2030, 1, 1)
    backend = create_backend(any_database_url)
    try:
        with backend.engine.begin() as conn:
            command.downgrade(_config(conn, BRANCHES, []), "es0013")
            for stream_id, key, generation in ((40, old, 1), (41, old, 2), (7, other, 1)):
                conn.execute(
                    stream.insert(),
                    {"stream_id": stream_id, "namespace": "t", "subject_key": key}
                    | {"generation": generation, "version": 0, "chain_hash": b"0" * 32}
                    | {"created_at": at},
                )
        upgrade_schema(backend.engine)
        assert schema_differences(backend.engine, TABLES) == []
        with backend.engine.connect() as conn:
            entries = conn.execute(
                sa.text(
                    "SELECT stream_id, subject_key, generation FROM stream_directory"
                    " WHERE namespace = 't' ORDER BY stream_id"
                )
            ).all()
            latest = conn.execute(LATEST_STREAM_ID, latest_stream_params("t", old)).scalar()
        store = EventStore(backend, KeyringFile(tmp_path / "keyring.json"))
        [event] = store.append("default", "someone", [NewEvent("note", {"n": 1})])
    finally:
        backend.dispose()
    assert [(i, bytes(k), g) for i, k, g in entries] == [(7, other, 1), (40, old, 1), (41, old, 2)]
    assert latest == 41
    assert event.stream.stream_id > 41
