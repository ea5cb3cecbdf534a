"""Forget's purge rewrites pages in proportion to the subject, not the store.

The tables a forget purges in bulk are keyed by subject (stream) first, so a
subject's rows and index entries are neighbours; every index by a random key
costs about one page write per purged row once the store is large.  These
tests pin that layout on the migrated schema.
The node directory, by node id, is the exception that forget leaves alone
(tests/erasure/test_node_directory.py).
"""

from __future__ import annotations

import sqlalchemy as sa

from eventstore import create_backend

PURGED_IN_BULK = ("memory_events", "memory_nodes", "memory_vectors")


def test_purged_tables_are_keyed_by_subject_first(any_database_url: str) -> None:
    backend = create_backend(any_database_url)
    try:
        inspector = sa.inspect(backend.engine)
        leading = {
            t: inspector.get_pk_constraint(t)["constrained_columns"][0] for t in PURGED_IN_BULK
        }
        random_keyed = {
            (table, tuple(index["column_names"]))
            for table in PURGED_IN_BULK
            for index in inspector.get_indexes(table)
            if index["column_names"][0] != "stream_id"
        }
    finally:
        backend.dispose()
    assert leading == dict.fromkeys(PURGED_IN_BULK, "stream_id")
    # Nodes named by id alone are found through memory_node_directory, which
    # erasure does not purge: no index of these tables leads with a random key.
    assert random_keyed == set()


def test_small_row_tables_are_the_ordered_tree_itself_on_sqlite(sqlite_url: str) -> None:
    backend = create_backend(sqlite_url)
    try:
        with backend.engine.connect() as conn:
            query = "SELECT name, sql FROM sqlite_master WHERE type = 'table'"
            ddl: dict[str, str] = dict(conn.exec_driver_sql(query).all())
    finally:
        backend.dispose()
    clustered = {t for t in PURGED_IN_BULK if "WITHOUT ROWID" in ddl[t].upper()}
    # memory_vectors keeps its rowid: its rows are too large for a WITHOUT ROWID leaf.
    assert clustered == {"memory_events", "memory_nodes"}
