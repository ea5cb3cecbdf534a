"""The distributed layout `oblivio db upgrade` gives a store on a Citus coordinator."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from eventstore import EventStore, KeyringFile, NewEvent, Subject, create_backend
from eventstore.migrate import upgrade
from oblivio.bootstrap import upgrade_schema
from oblivio_bench.citus import CitusCluster
from projections import MIGRATIONS, metadata

pytestmark = pytest.mark.citus

SUBJECTS = [f"person-{i}" for i in range(12)]


def placement(url: str) -> dict[str, str]:
    """Each table's kind in Citus's metadata: ``h`` distributed by hash, ``n`` local."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT logicalrelid::text, partmethod FROM pg_dist_partition"
        ).fetchall()
    return dict(rows)


def nodes_holding_events(url: str) -> set[int]:
    """The ports of the nodes whose shards of ``events`` hold at least one row."""
    with psycopg.connect(url) as conn:
        shards = conn.execute(
            "SELECT DISTINCT get_shard_id_for_distribution_column('events', stream_id) FROM events"
        ).fetchall()
        ports = dict(
            conn.execute(
                "SELECT shardid, nodeport FROM citus_shards WHERE table_name = 'events'::regclass"
            ).fetchall()
        )
    return {ports[shard] for (shard,) in shards}


@pytest.fixture
def bare_citus_url(citus: CitusCluster) -> Iterator[str]:
    """A database on the cluster with the extension and nodes, and no schema yet."""
    name = f"oblivio_d_{uuid.uuid4().hex[:12]}"
    yield citus.create_database(name)
    citus.drop_database(name)


def test_upgrade_distributes_the_log_and_projections_by_stream(citus_url: str) -> None:
    kinds = placement(citus_url)
    assert kinds["events"] == "h"
    for table in (
        "streams",
        "data_keys",
        "memory_events",
        "memory_nodes",
        "memory_vectors",
        "memory_operations",
        "retrieval_images",
    ):
        assert kinds[table] == "h", table
    # Central, on the coordinator: where a subject's stream is looked up, and the
    # deployment's own tables.
    for table in ("stream_directory", "erasure_requests", "certificates", "api_keys"):
        assert kinds[table] == "n", table
    # Every table of the schema has a place.
    with psycopg.connect(citus_url) as conn:
        (unplaced,) = conn.execute(
            "SELECT count(*) FROM pg_tables t WHERE schemaname = 'public'"
            " AND tablename <> 'alembic_version'"
            " AND NOT EXISTS (SELECT FROM pg_dist_partition p"
            "                  WHERE p.logicalrelid = t.tablename::regclass)"
        ).fetchone()  # type: ignore[misc]
    assert unplaced == 0


def test_a_single_node_store_moves_onto_the_cluster_without_re_encryption(
    bare_citus_url: str, tmp_path: Path
) -> None:
    # The store as a restored single-node dump would be: migrated, its tables
    # still plain PostgreSQL tables on the coordinator.
    backend = create_backend(bare_citus_url)
    upgrade(backend.engine, [MIGRATIONS], [metadata])
    assert placement(bare_citus_url) == {}
    keyring = KeyringFile(tmp_path / "keyring.json")
    store = EventStore(backend, keyring)
    written = [
        store.append("default", subject, [NewEvent("note", {"n": n, "who": subject})])[0]
        for n, subject in enumerate(SUBJECTS * 2)
    ]
    with psycopg.connect(bare_citus_url) as conn:
        before = conn.execute("SELECT event_id, payload FROM events ORDER BY position").fetchall()

    upgrade_schema(store.engine)  # what `oblivio db upgrade` runs

    assert placement(bare_citus_url)["events"] == "h"
    with psycopg.connect(bare_citus_url) as conn:
        after = conn.execute("SELECT event_id, payload FROM events ORDER BY position").fetchall()
    assert after == before  # the same ciphertexts, moved, not re-sealed
    assert len(nodes_holding_events(bare_citus_url)) == 2  # subjects on both workers
    page = store.read_all(limit=1000)
    assert [e.event_id for e in page.events] == [e.event_id for e in written]
    assert [e.data for e in page.events] == [e.data for e in written]
    assert store.read_stream("default", "person-3")[1].data == {"n": 15, "who": "person-3"}
    assert store.verify().ok
    # And it goes on writing.
    store.append("default", "person-3", [NewEvent("note", {"n": 99})])
    assert [e.data["n"] for e in store.read_stream("default", "person-3")] == [3, 15, 99]
    store.close()


def test_an_event_records_the_coordinators_transaction_id(citus_url: str, tmp_path: Path) -> None:
    # The merged order's premise (eventstore.backends.citus): Citus evaluates
    # pg_current_xact_id() on the coordinator before routing the append.
    store = EventStore(create_backend(citus_url), KeyringFile(tmp_path / "keyring.json"))
    try:
        with store.transaction() as tx:
            stream = tx.lock_stream(Subject("default", "person-1"), create=True)
            [event] = tx.append_locked(stream, [NewEvent("note", {"n": 1})])
            (xid,) = tx.connection.exec_driver_sql(
                "SELECT pg_current_xact_id()::text::bigint"
            ).one()
        assert event.commit_group == xid
        with psycopg.connect(citus_url) as conn:
            (stored,) = conn.execute(
                "SELECT commit_group FROM events WHERE event_id = %s", [event.event_id]
            ).fetchone()  # type: ignore[misc]
        assert stored == xid
    finally:
        store.close()
