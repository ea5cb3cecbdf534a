"""What the Citus test tier pays per test process: cluster start, database, migration, stop.

    python benchmarks/citus_start.py [--runs 3]

Starts the tier's cluster (a coordinator and two workers, 4 shards, fsync off;
``oblivio_bench.citus``), creates a database on it (``CitusCluster.create_database``:
the database and the extension on every node, the workers registered), migrates
it (the distributed layout ``oblivio db upgrade`` makes) and stops the cluster,
``--runs`` times, printing the seconds of each step.
"""

from __future__ import annotations

import argparse
import time

from eventstore import create_backend
from oblivio.bootstrap import upgrade_schema
from oblivio_bench.citus import citus_cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for run in range(1, args.runs + 1):
        began = time.monotonic()
        with citus_cluster(workers=2, shard_count=4, durable=False) as cluster:
            started = time.monotonic()
            url = cluster.create_database("start_probe")
            created = time.monotonic()
            backend = create_backend(url)
            upgrade_schema(backend.engine)
            backend.dispose()
            migrated = time.monotonic()
        stopped = time.monotonic()
        print(
            f"run {run}: start {started - began:.1f} s, database {created - started:.1f} s,"
            f" migration {migrated - created:.1f} s, stop {stopped - migrated:.1f} s"
        )


if __name__ == "__main__":
    main()
