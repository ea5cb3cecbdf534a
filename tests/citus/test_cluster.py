"""The Citus tier's cluster: a coordinator and two workers from the installed extension."""

from __future__ import annotations

import psycopg
import pytest

from oblivio_bench.citus import CitusCluster

pytestmark = pytest.mark.citus


def test_the_coordinator_knows_both_workers(citus: CitusCluster, citus_url: str) -> None:
    # In the session's database (creating one on three nodes costs seconds); the probe
    # table is dropped again, so the layout stays as `oblivio db upgrade` made it.
    with psycopg.connect(citus_url, autocommit=True) as conn:
        workers = conn.execute(
            "SELECT nodeport FROM pg_dist_node WHERE shouldhaveshards AND isactive"
            " AND groupid <> 0 ORDER BY nodeport"
        ).fetchall()
        conn.execute("CREATE TABLE probe (k bigint PRIMARY KEY)")
        try:
            conn.execute("SELECT create_distributed_table('probe', 'k')")
            placed = conn.execute(
                "SELECT DISTINCT nodeport FROM citus_shards WHERE table_name = 'probe'::regclass"
            ).fetchall()
        finally:
            conn.execute("DROP TABLE probe")
    assert sorted(p for (p,) in workers) == sorted(w.port for w in citus.workers)
    assert sorted(p for (p,) in placed) == sorted(w.port for w in citus.workers)
