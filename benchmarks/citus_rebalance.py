"""Adding a third worker and rebalancing shards onto it while writers run.

    python benchmarks/citus_rebalance.py [--writers 4] [--forgets 8] [--load 5]

Starts a durable coordinator and two workers (``oblivio_bench.citus``), migrates
a database, and runs the load of ``benchmarks/citus_load.py`` (writer processes
through ``MemoryClient.store``, a forgetter through ``MemoryClient.forget``, the
real ``oblivio worker``, a follower of the whole log).  After ``--load`` seconds
it starts a third worker, registers it (``citus_add_node``) and starts a
rebalance (``citus_rebalance_start()``, shards moved by logical replication
while writes go on), waits for it to finish, and lets the load run
``--load`` seconds more.  Then it checks, as the crash rounds do: 0
acknowledged writes lost, every chain verifies, the follower got every event
once in order, one certificate per forget, and no canary of a forgotten subject
in the files of any of the four nodes.  It prints the shards per worker before
and after, how long the rebalance took, and the append rate before, during
and after it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import psycopg
from citus_load import check, drop_slots, keep_wal, load_on, scan_nodes, streams_per_worker

from oblivio_bench.citus import citus_cluster

DATABASE = "rebalance"


def shards_per_node(url: str) -> dict[int, int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT nodeport, count(*) FROM citus_shards"
            " WHERE citus_table_type = 'distributed' GROUP BY 1 ORDER BY 1"
        ).fetchall()
    return dict(rows)


def rebalance(url: str, timeout: float = 600.0) -> tuple[float, str]:
    """Start the rebalance and wait for its background job; seconds taken and final state."""
    started = time.monotonic()
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT citus_rebalance_start()").fetchone()
        job = row[0] if row else None
        while time.monotonic() - started < timeout:
            state = conn.execute(
                "SELECT state FROM pg_dist_background_job WHERE job_id = %s", (job,)
            ).fetchone()
            if state and state[0] in ("finished", "failed", "cancelled"):
                return time.monotonic() - started, str(state[0])
            time.sleep(0.5)
    return time.monotonic() - started, "timed out"


def rate(load_acks: int, seconds: float) -> float:
    return load_acks / seconds if seconds else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--forgets", type=int, default=8)
    parser.add_argument("--load", type=float, default=5.0, help="seconds before and after")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        citus_cluster(workers=2) as cluster,
        load_on(
            cluster, DATABASE, Path(tmp), writers=args.writers, forgets=args.forgets, every=1.0
        ) as load,
    ):
        url = load.config["database_url"]
        load.wait_for_acks(20)
        a0 = load.acknowledged()
        time.sleep(args.load)
        a1 = load.acknowledged()
        before = shards_per_node(url)
        node = cluster.add_worker()
        cluster.add_node_to_database(node, DATABASE)
        keep_wal(cluster, DATABASE, [node])
        took, state = rebalance(url)
        a2 = load.acknowledged()
        after = shards_per_node(url)
        time.sleep(args.load)
        a3 = load.acknowledged()
        load.finish()
        figures = check(load)
        held = streams_per_worker(url)
        canaries = scan_nodes(cluster, DATABASE, load.needles)
        drop_slots(cluster, DATABASE)

    print(f"distributed shards per node port before: {before}")
    print(f"after adding port {node.port} and rebalancing: {after}")
    print(f"rebalance: {state} in {took:.1f} s")
    print(
        f"appends/s before {rate(a1 - a0, args.load):.0f}, during {rate(a2 - a1, took):.0f},"
        f" after {rate(a3 - a2, args.load):.0f}"
    )
    for key, value in figures.items():
        print(f"{key}: {value}")
    print(f"streams per worker port: {held}")
    print(f"canaries found per node: {canaries}")


if __name__ == "__main__":
    main()
