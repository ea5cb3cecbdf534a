"""What the 2PC-aware horizon costs a follower's page on the Citus cluster.

    python benchmarks/citus_horizon_cost.py [--events 400] [--page 100] [--rounds 7] [--reads 30]

``eventstore.backends.citus`` reads a reader's horizon on the coordinator before
each log page.  Besides the snapshot and the xid locks, it asks the workers which
of the 2PC records (``pg_dist_transaction``) the read could pass are still
prepared there (``master_run_on_worker``: a new connection to each worker named
by such a record), but only when there is such a record above what the reader
and the process already know: under continuous writes there is one at nearly
every read (every append leaves one), when the writes have stopped there is none.

Starts a coordinator and two workers (fsync off: nothing here is about
durability), appends ``--events`` events to 16 subjects with 2PC recovery
paused (so the records stay, as under continuous writes), then alternates, in
``--rounds`` rounds of ``--reads`` reads each:

- ``page, no worker asked``: ``EventStore.read_all`` of ``--page`` events from
  the start of the log, once the process knows every record to be committed (the
  first read asked; what a page cost before this change, plus the records' scan);
- ``horizon, workers asked``: the horizon's statement with its floor below the
  records, so both workers are asked (what a read under continuous writes pays);
- ``horizon, no worker asked``: the same with the floor above every record;
- ``horizon before the change``: the statement as it was (snapshot and locks).

Prints medians over rounds of each round's median wall time per read, this
process's CPU per read, and the CPU the three servers spent per read (their
postmasters' reaped children and live backends, from /proc), and what asking
the workers adds to a page.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from eventstore import EventStore, KeyringFile, NewEvent, create_backend
from eventstore.backends.citus import _LOCKED_HORIZON
from eventstore.model import START
from oblivio.bootstrap import upgrade_schema
from oblivio_bench.citus import CitusCluster, citus_cluster, horizon_statement, node_cpu


def measure(read: Callable[[], object], reads: int, cluster: CitusCluster) -> tuple[float, ...]:
    """Median wall ms of one read, this process's CPU ms and the servers' CPU ms per read."""
    walls = []
    cpu0, servers0 = time.process_time(), sum(node_cpu(n) for n in cluster.nodes)
    for _ in range(reads):
        t0 = time.perf_counter()
        read()
        walls.append(time.perf_counter() - t0)
    cpu = (time.process_time() - cpu0) / reads
    servers = (sum(node_cpu(n) for n in cluster.nodes) - servers0) / reads
    return statistics.median(walls) * 1e3, cpu * 1e3, servers * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=400)
    parser.add_argument("--page", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reads", type=int, default=30)
    args = parser.parse_args()
    with citus_cluster(workers=2, durable=False) as cluster, tempfile.TemporaryDirectory() as tmp:
        url = cluster.create_database("horizon_cost")
        backend = create_backend(url)
        upgrade_schema(backend.engine)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET citus.recover_2pc_interval = -1")
            conn.execute("SELECT pg_reload_conf()")
        store = EventStore(backend, KeyringFile(Path(tmp) / "keyring.json"))
        for n in range(args.events):
            store.append("bench", f"person-{n % 16}", [NewEvent("note", {"n": n})])
        with psycopg.connect(url, autocommit=True) as conn:
            # Read with SQL: a read through the store would settle every group shown.
            last = conn.execute(
                "SELECT commit_group, position FROM events ORDER BY 1 DESC, 2 DESC LIMIT 1"
            ).fetchone()
            assert last is not None
            records = conn.execute("SELECT count(*) FROM pg_dist_transaction").fetchone()
            ask, alone = horizon_statement(0), horizon_statement(last[0] + 1)
            before = _LOCKED_HORIZON.encode()
            shapes: dict[str, Callable[[], object]] = {
                "page, no worker asked": lambda: store.read_all(START, args.page),
                "horizon, workers asked": lambda: conn.execute(ask).fetchone(),
                "horizon, no worker asked": lambda: conn.execute(alone).fetchone(),
                "horizon before the change": lambda: conn.execute(before).fetchone(),
            }
            store.read_all(START, args.page)  # asks once: every record is committed
            figures: dict[str, list[tuple[float, ...]]] = {name: [] for name in shapes}
            for _ in range(args.rounds):
                for name, read in shapes.items():
                    figures[name].append(measure(read, args.reads, cluster))
        store.close()
    print(
        f"{args.events} events, {records[0] if records else 0} 2PC records,"
        f" pages of {args.page}, {args.rounds} rounds of {args.reads} reads;"
        f" load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'read':28} {'wall ms':>8} {'CPU ms':>8} {'servers CPU ms':>15}")
    medians = {}
    for name, rows in figures.items():
        medians[name] = [statistics.median(column) for column in zip(*rows, strict=True)]
        wall, cpu, servers = medians[name]
        print(f"{name:28} {wall:8.2f} {cpu:8.2f} {servers:15.2f}")
    asked, alone_ = medians["horizon, workers asked"], medians["horizon, no worker asked"]
    page = medians["page, no worker asked"]
    extra = [a - b for a, b in zip(asked, alone_, strict=True)]
    print(
        f"asking the workers adds {extra[0]:.2f} ms wall, {extra[1]:.2f} ms of this process's"
        f" CPU and {extra[2]:.2f} ms of the servers' CPU to a read: a page of {args.page}"
        f" that asks costs {(page[0] + extra[0]) / page[0]:.2f}x the wall time of one that"
        f" does not, {(page[2] + extra[2]) / max(page[2], 1e-9):.2f}x the servers' CPU"
    )


if __name__ == "__main__":
    main()
