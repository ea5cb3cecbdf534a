"""The Citus tier's cluster: a coordinator and two workers from the installed extension."""

from __future__ import annotations

import psycopg
import pytest

from oblivio_bench.citus import CitusCluster

pytestmark = pytest.mark.citus


def test_the_coordinator_knows_both_workers(citus: CitusCluster) -> None:
    url = citus.create_database("cluster_probe")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            workers = conn.execute(
                "SELECT nodeport FROM pg_dist_node WHERE shouldhaveshards AND isactive"
                " AND groupid <> 0 ORDER BY nodeport"
            ).fetchall()
            conn.execute("CREATE TABLE probe (k bigint PRIMARY KEY)")
            conn.execute("SELECT create_distributed_table('probe', 'k')")
            placed = conn.execute(
                "SELECT DISTINCT nodeport FROM citus_shards WHERE table_name = 'probe'::regclass"
            ).fetchall()
    finally:
        citus.drop_database("cluster_probe")
    assert sorted(p for (p,) in workers) == sorted(w.port for w in citus.workers)
    assert sorted(p for (p,) in placed) == sorted(w.port for w in citus.workers)
