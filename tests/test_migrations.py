"""Migrations produce exactly the schema the models describe, on both backends."""

from __future__ import annotations

import sqlalchemy as sa

import projections
from eventstore import create_backend
from eventstore.migrate import schema_differences


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
