"""What the 2PC-aware horizon costs a follower's page on the Citus cluster.

    python benchmarks/citus_horizon_cost.py [--events 400] [--page 100] [--rounds 7] [--reads 30]

``eventstore.backends.citus`` reads a reader's horizon on the coordinator before
each log page.  Besides the snapshot and the xid locks, it asks the workers which
of the 2PC records (``pg_dist_transaction``) the read could pass are still
prepared there, but only when there is such a record above what the reader and
the process already know: under continuous writes there is one at nearly every
read (every append leaves one), when the writes have stopped there is none.  It
asks over one connection per worker that the process keeps
(``eventstore.backends.citus_prepared``); it used to ask through the coordinator
(``master_run_on_worker``), a new connection to each worker per ask, which this
script keeps as ``_ASKED_THROUGH_THE_COORDINATOR`` to measure both in one run.

Starts a coordinator and two workers (fsync off: nothing here is about
durability), appends ``--events`` events to 16 subjects with 2PC recovery
paused (so the records stay, as under continuous writes), then alternates, in
``--rounds`` rounds of ``--reads`` reads each:

- ``page, no worker asked``: ``EventStore.read_all`` of ``--page`` events from
  the start of the log, once the process knows every record to be committed
  (what a page cost before the guard, plus the records' scan);
- ``horizon, all asked, kept`` / ``… new conns``: the horizon with its floor below
  every record, so both workers are asked about all of them, over the kept
  connections / through the coordinator as before;
- ``horizon, 16 asked, kept`` / ``… new conns``: the same about the 16 newest
  records only (a reader under continuous writes asks about the appends since
  its last read; here one per subject);
- ``horizon, no worker asked``: the floor above every record;
- ``horizon before the guard``: the statement as it was before the guard
  (snapshot and locks).

Prints medians over rounds of each round's median wall time per read, this
process's CPU per read, and the CPU the three servers spent per read (their
postmasters' reaped children and live backends, from /proc), and what asking
the workers adds to a page each way.
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
from eventstore.backends.citus import _LOCKED_HORIZON, CitusBackend, widened_xid
from eventstore.model import START
from oblivio.bootstrap import upgrade_schema
from oblivio_bench.citus import CitusCluster, citus_cluster, node_cpu

# The gids of the prepared transactions a worker holds in this database, as one line.
_PREPARED_ON_WORKER = (
    "SELECT coalesce(string_agg(gid, ' '), '') FROM pg_prepared_xacts"
    " WHERE database = current_database()"
)

# The guard as it was: the same records, asked about in the coordinator's statement
# through ``master_run_on_worker`` (a new connection to each worker named, per ask).
_ASKED_THROUGH_THE_COORDINATOR = f"""
WITH base AS MATERIALIZED ({_LOCKED_HORIZON} AS horizon),
recorded AS MATERIALIZED (
    SELECT r.groupid, r.gid, r.xid
      FROM base, (SELECT t.groupid, t.gid, {widened_xid("t.xmin", "snap.xmax")} AS xid
                    FROM pg_dist_transaction AS t,
                         (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint
                                 AS xmax) AS snap) AS r
     WHERE r.xid < base.horizon AND r.xid >= :floor
       -- a group no longer in the cluster: no page reads it either
       AND EXISTS (SELECT FROM pg_dist_node AS n
                    WHERE n.groupid = r.groupid AND n.noderole = 'primary')),
asked AS MATERIALIZED (
    SELECT n.groupid, n.nodename, n.nodeport FROM pg_dist_node AS n
     WHERE n.noderole = 'primary' AND n.groupid IN (SELECT groupid FROM recorded)),
prepared AS MATERIALIZED (
    SELECT a.groupid, w.success, string_to_array(w.result, ' ') AS gids
      FROM (SELECT array_agg(nodename) AS names, array_agg(nodeport) AS ports,
                   array_agg($${_PREPARED_ON_WORKER}$$::text) AS commands FROM asked) AS q,
           master_run_on_worker(q.names, q.ports, q.commands, true) AS w
      JOIN asked AS a ON a.nodename = w.node_name AND a.nodeport = w.node_port)
SELECT CASE
    WHEN NOT EXISTS (SELECT FROM recorded) THEN base.horizon
    WHEN NOT (SELECT bool_and(success) FROM prepared) THEN NULL
    ELSE least(base.horizon, (
        SELECT min(r.xid) FROM recorded AS r
          JOIN prepared AS p ON p.groupid = r.groupid AND r.gid = ANY (p.gids)))
    END
  FROM base
"""


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
        assert isinstance(backend, CitusBackend)
        upgrade_schema(backend.engine)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET citus.recover_2pc_interval = -1")
            conn.execute("SELECT pg_reload_conf()")
        store = EventStore(backend, KeyringFile(Path(tmp) / "keyring.json"))
        for n in range(args.events):
            store.append("bench", f"person-{n % 16}", [NewEvent("note", {"n": n})])
        with psycopg.connect(url, autocommit=True) as conn:
            # Read with SQL: a read through the store would settle every group shown.
            last = conn.execute("SELECT max(commit_group) FROM events").fetchone()
            recent = conn.execute(
                "SELECT xmin::text::bigint FROM pg_dist_transaction"
                " ORDER BY xmin::text::bigint DESC LIMIT 1 OFFSET 15"
            ).fetchone()
            records = conn.execute("SELECT count(*) FROM pg_dist_transaction").fetchone()
            assert last is not None
            assert recent is not None
            assert records is not None

            def kept(floor: int) -> Callable[[], object]:
                def read() -> object:
                    with backend.statement_reads() as reads:
                        return backend.cluster_horizon(reads, floor)

                return read

            def through_the_coordinator(floor: int) -> Callable[[], object]:
                sql = _ASKED_THROUGH_THE_COORDINATOR.replace(":floor", str(floor)).encode()
                return lambda: conn.execute(sql).fetchone()

            shapes: dict[str, Callable[[], object]] = {
                "page, no worker asked": lambda: store.read_all(START, args.page),
                "horizon, all asked, kept": kept(0),
                "horizon, all asked, new conns": through_the_coordinator(0),
                "horizon, 16 asked, kept": kept(recent[0]),
                "horizon, 16 asked, new conns": through_the_coordinator(recent[0]),
                "horizon, no worker asked": kept(last[0] + 1),
                "horizon before the guard": lambda: conn.execute(
                    _LOCKED_HORIZON.encode()
                ).fetchone(),
            }
            store.read_all(START, args.page)  # asks once: every record is committed
            figures: dict[str, list[tuple[float, ...]]] = {name: [] for name in shapes}
            for _ in range(args.rounds):
                for name, read in shapes.items():
                    figures[name].append(measure(read, args.reads, cluster))
        store.close()
    print(
        f"{args.events} events, {records[0]} 2PC records, pages of {args.page},"
        f" {args.rounds} rounds of {args.reads} reads; load average {os.getloadavg()[0]:.1f}"
    )
    print(f"{'read':30} {'wall ms':>8} {'CPU ms':>8} {'servers CPU ms':>15}")
    medians = {}
    for name, rows in figures.items():
        medians[name] = [statistics.median(column) for column in zip(*rows, strict=True)]
        wall, cpu, servers = medians[name]
        print(f"{name:30} {wall:8.2f} {cpu:8.2f} {servers:15.2f}")
    page, alone = medians["page, no worker asked"], medians["horizon, no worker asked"]
    for asked in ("all", "16"):
        for way in ("kept", "new conns"):
            shape = medians[f"horizon, {asked} asked, {way}"]
            extra = [a - b for a, b in zip(shape, alone, strict=True)]
            print(
                f"asking about {asked} records ({way}) adds {extra[0]:.2f} ms wall,"
                f" {extra[1]:.2f} ms of this process's CPU and {extra[2]:.2f} ms of the"
                f" servers' CPU to a read: a page of {args.page} that asks costs"
                f" {(page[0] + extra[0]) / page[0]:.2f}x the wall time of one that does not,"
                f" {(page[2] + extra[2]) / max(page[2], 1e-9):.2f}x the servers' CPU"
            )


if __name__ == "__main__":
    main()
