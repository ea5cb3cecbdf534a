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
