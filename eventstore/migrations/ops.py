"""Table operations for the migration scripts of every package, in this project's terms.

A script then lists what is particular to each table (its columns, key and
indexes) and not the naming and nullability boilerplate Alembic's templates
repeat: columns are NOT NULL unless marked ``null=True``, the primary key is
``pk_<table>`` and an index ``ix_<table>_<columns>``, the names the models'
naming convention gives (``eventstore.schema``).

Migration scripts are history: each must keep emitting the DDL it emitted when
it was written (``tests/test_migrations.py`` compares the result with the
models on both backends).  So these helpers never change what they emit; a new
convention gets a new helper.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

#: Surrogate ids: BIGINT on PostgreSQL, INTEGER (the rowid alias) on SQLite.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
#: How derived tables (projections) name a stream: BIGINT on both backends.
StreamId = sa.BigInteger()
#: SHA-256 digests, chain hashes and keyed hashes (HMAC-SHA-256): 32 bytes.
Digest = sa.LargeBinary(length=32)


def column(name: str, type_: Any, *, null: bool = False, **options: Any) -> sa.Column[Any]:
    """A column, NOT NULL unless ``null``."""
    return sa.Column(name, type_, nullable=null, **options)


def index_name(table: str, columns: Sequence[str]) -> str:
    return f"ix_{table}_{'_'.join(columns)}"


def create_table(
    name: str,
    *elements: sa.schema.SchemaItem,
    key: Sequence[str],
    indexes: Sequence[Sequence[str]] = (),
    **options: Any,
) -> None:
    """Create table ``name`` of ``elements`` (columns, other constraints) with its
    primary key over ``key``, then one (non-unique) index for each of ``indexes``."""
    primary_key = sa.PrimaryKeyConstraint(*key, name=op.f(f"pk_{name}"))
    op.create_table(name, *elements, primary_key, **options)
    for columns in indexes:
        op.create_index(op.f(index_name(name, columns)), name, list(columns), unique=False)


def drop_table(name: str, indexes: Sequence[Sequence[str]] = ()) -> None:
    """Undo :func:`create_table`: its indexes (last first), then the table."""
    for columns in reversed(indexes):
        op.drop_index(op.f(index_name(name, columns)), table_name=name)
    op.drop_table(name)
