"""kill -9 rounds on a Citus cluster under load: nothing acknowledged is lost.

    python benchmarks/citus_crash.py [--rounds 3] [--writers 4] [--forgets 12] [--load 4]
        [--down 0]

Starts a durable coordinator and two workers (fsync on; ``oblivio_bench.citus``),
migrates a database there, seeds ``--forgets`` subjects whose memories hold
random canaries, then runs the load of ``benchmarks/citus_load.py``: ``--writers``
processes storing memories through ``MemoryClient.store`` round-robin over
4 subjects each (their streams land on both workers), a process forgetting the
seeded subjects one by one (``MemoryClient.forget``), the real ``oblivio worker``
(projections, erasure rebuilds, certificates) and a follower reading the whole
log.  Then ``--rounds`` times the coordinator, and ``--rounds`` times a worker
(the two in turn), is killed with SIGKILL after ``--load`` seconds of load and
restarted (crash recovery), after ``--down`` seconds of outage (default 0: at
once; an outage longer than the erasure jobs' backoff, about 30 s, checks that
attempts a node's absence failed are retried, not counted); each round waits
until writes are acknowledged again.  Nothing is restarted but the node: the
writers, the worker and the follower retry their calls.

Afterwards it prints a table of the rounds and the checks: every acknowledged
write is in the log and decrypts (0 lost), every chain verifies, the follower
got every event of the log once in the log's order (0 skipped, 0 duplicated),
every acknowledged forget completed with exactly one certificate, and no
canary of a forgotten subject is in any node's files (data directory and log).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from citus_load import check, drop_slots, load_on, restart, scan_nodes, streams_per_worker

from oblivio_bench.citus import citus_cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="kills of each node kind")
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--forgets", type=int, default=12)
    parser.add_argument("--load", type=float, default=4.0, help="seconds of load before a kill")
    parser.add_argument("--down", type=float, default=0.0, help="seconds a killed node stays down")
    args = parser.parse_args()
    started = time.monotonic()
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        citus_cluster(workers=2) as cluster,
        load_on(
            cluster,
            "crash",
            Path(tmp),
            writers=args.writers,
            forgets=args.forgets,
            every=args.load * 2 * args.rounds / args.forgets,
        ) as load,
    ):
        load.wait_for_acks(20)
        victims = [cluster.coordinator] * args.rounds + [
            cluster.workers[r % len(cluster.workers)] for r in range(args.rounds)
        ]
        for number, node in enumerate(victims, 1):
            time.sleep(args.load)
            before = load.acknowledged()
            cluster.kill_node(node)
            killed = time.monotonic()
            time.sleep(args.down)  # the outage itself, not a wait for a condition
            restart(cluster, node)
            restarted = time.monotonic() - killed
            resumed = load.wait_for_acks(10)
            rows.append((number, node.name, before, restarted, resumed))
        time.sleep(args.load)
        load.finish()
        figures = check(load)
        url = load.config["database_url"]
        held = streams_per_worker(url)
        canaries = scan_nodes(cluster, "crash", load.needles)
        drop_slots(cluster, "crash")

    print("| round | killed | acknowledged before | down + restart s | next 10 acks s |")
    print("|---|---|---|---|---|")
    for number, name, before, restarted, resumed in rows:
        print(f"| {number} | {name} | {before} | {restarted:.1f} | {resumed:.1f} |")
    print()
    for key, value in figures.items():
        print(f"{key}: {value}")
    print(f"streams per worker port: {held}")
    print(f"canaries found per node: {canaries}")
    print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
