"""A model of oblivio on Citus with 8 and 32 workers, from costs measured on 1, 2 and 4.

    python benchmarks/citus_model.py [--workers 1,2,4] [--appends 400] [--pages 40]

Everything here runs on one machine, so a larger cluster cannot be timed: this
script measures what each operation costs each node, in CPU seconds (from /proc,
``oblivio_bench.citus.node_cpu``) and WAL bytes, on clusters of the given worker
counts (32 shards, fsync off: CPU, not disk waits, is what is counted), and fits
how each cost moves with the number of workers.  Then it extrapolates, as a
model and not a measurement, to 8 and 32 workers of the same size as the
coordinator.

Operations measured on each cluster, through ``EventStore`` on the coordinator:

- ``append``: one event per transaction to 64 subjects (streams on every worker):
  the coordinator's ``streams`` and ``data_keys`` rows, the events on one shard,
  two-phase commit (PREPARE and COMMIT PREPARED on that worker);
- ``read_stream``: one subject's 10 events (one shard);
- ``read_all page``: a page of 100 events of the whole log (every shard, after
  the horizon's statement on the coordinator), the workers not asked;
- ``horizon ask``: the reader's horizon when the 2PC records of the last append
  to each of the 64 subjects lie above it (as under writes to subjects on every
  worker): the coordinator's statement, then each worker asked which are still
  prepared, over the connection the process keeps to it.

For each it prints, per operation: the coordinator's CPU, the workers' CPU (all of
them together), the coordinator's and the workers' WAL bytes.  The model: with K
cores per node, the coordinator can sustain K / (its CPU per operation) of an
operation per second and N workers N·K / (their CPU per operation), so a mix is
bounded by the smaller; the script prints both bounds at 1, 2, 4 (measured
costs) and at 8 and 32 workers (costs fitted linearly in the worker count).
What the model leaves out: the network (all nodes share loopback here), disks
(fsync off), lock waits, and the cores of this machine, which all nodes share.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import psycopg

from eventstore import START, EventStore, KeyringFile, NewEvent, create_backend
from eventstore.backends.citus import CitusBackend
from oblivio.bootstrap import upgrade_schema
from oblivio_bench.citus import CitusCluster, Node, citus_cluster, node_cpu

SUBJECTS = 64
MODELLED = (8, 32)
#: Per operation: coordinator CPU ms, workers' CPU ms, coordinator WAL bytes, workers' WAL bytes.
Cost = tuple[float, float, float, float]


def wal_bytes(node: Node, database: str) -> int:
    with psycopg.connect(node.url(database), autocommit=True) as conn:
        row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')")
        return int(row.fetchone()[0])


def cost_of(
    cluster: CitusCluster, database: str, operation: Callable[[], object], count: int
) -> Cost:
    """What ``count`` calls of ``operation`` cost each node, per call."""
    nodes = cluster.nodes
    cpu0 = [node_cpu(n) for n in nodes]
    wal0 = [wal_bytes(n, database) for n in nodes]
    for _ in range(count):
        operation()
    cpu = [node_cpu(n) - c for n, c in zip(nodes, cpu0, strict=True)]
    wal = [wal_bytes(n, database) - w for n, w in zip(nodes, wal0, strict=True)]
    return (
        cpu[0] * 1e3 / count,
        sum(cpu[1:]) * 1e3 / count,
        wal[0] / count,
        sum(wal[1:]) / count,
    )


def measure(workers: int, args: argparse.Namespace) -> dict[str, Cost]:
    """Each operation's cost on a coordinator with ``workers`` workers (medians of rounds)."""
    database = "model"
    with (
        citus_cluster(workers=workers, durable=False) as cluster,
        tempfile.TemporaryDirectory() as tmp,
    ):
        url = cluster.create_database(database)
        backend = create_backend(url)
        assert isinstance(backend, CitusBackend)
        upgrade_schema(backend.engine)
        with psycopg.connect(url, autocommit=True) as conn:  # the records stay, as under writes
            conn.execute("ALTER SYSTEM SET citus.recover_2pc_interval = -1")
            conn.execute("SELECT pg_reload_conf()")
        store = EventStore(backend, KeyringFile(Path(tmp) / "keyring.json"))
        for n in range(SUBJECTS):  # every subject's stream and key exist, and 10 events
            store.append("model", f"person-{n}", [NewEvent("note", {"n": i}) for i in range(10)])
        store.read_all(START, 100)  # the process knows every record to be committed
        counter = iter(range(10**9))

        def append() -> object:
            n = next(counter)
            return store.append("model", f"person-{n % SUBJECTS}", [NewEvent("note", {"n": n})])

        def horizon_ask() -> Callable[[], object]:
            # Asks about the last append to each subject: the records a reader under
            # continuous writes asks about, made anew each round (not counted).
            with psycopg.connect(url, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT xmin::text::bigint FROM pg_dist_transaction"
                    " ORDER BY 1 DESC LIMIT 1 OFFSET %s",
                    (SUBJECTS - 1,),
                ).fetchone()
            assert row is not None

            def ask() -> object:
                with backend.statement_reads() as reads:
                    return backend.cluster_horizon(reads, row[0])

            return ask

        shapes: dict[str, tuple[Callable[[], Callable[[], object]], int]] = {
            "append": (lambda: append, args.appends),
            "read_stream": (lambda: lambda: store.read_stream("model", "person-1"), args.pages),
            "read_all page": (lambda: lambda: store.read_all(START, 100), args.pages),
            "horizon ask": (horizon_ask, args.pages),
        }
        rounds: dict[str, list[Cost]] = {name: [] for name in shapes}
        for _ in range(args.rounds):
            for name, (operation, count) in shapes.items():
                rounds[name].append(cost_of(cluster, database, operation(), count))
        store.close()
    return {
        name: tuple(statistics.median(column) for column in zip(*costs, strict=True))
        for name, costs in rounds.items()
    }


def fit(xs: Sequence[int], ys: Sequence[float]) -> tuple[float, float]:
    """The line ``a + b·x`` through the measured costs (least squares), with ``b >= 0``:
    a cost that did not grow with the workers is taken as flat (its mean), so noise
    between the measured counts is not extrapolated into a cost that falls."""
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return mean_y, 0.0
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return (mean_y, 0.0) if b <= 0 else (mean_y - b * mean_x, b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--appends", type=int, default=400)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    started = time.monotonic()
    measured = {n: measure(n, args) for n in counts}
    print(
        f"measured on {counts} workers, 32 shards, {args.rounds} rounds (medians);"
        f" {time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.1f}"
    )
    header = "coord CPU ms  workers CPU ms  coord WAL B  workers WAL B"
    print(f"{'operation':14} {'workers':>7}  {header}")
    for name in measured[counts[0]]:
        for n in counts:
            c, w, cw, ww = measured[n][name]
            print(f"{name:14} {n:7d}  {c:12.3f}  {w:14.3f}  {cw:11.0f}  {ww:12.0f}")
    print("\nmodel: cost = a + b·workers per operation (b >= 0, fitted on the measured counts);")
    print("the bounds are operations per second per core of each node (K cores: times K)")
    print(f"{'operation':14} {'coordinator CPU ms':>24} {'workers CPU ms':>22}"
          f"  {'workers':>7}  {'coordinator bound':>17}  {'workers bound':>13}")  # fmt: skip
    for name in measured[counts[0]]:
        coordinator = fit(counts, [measured[n][name][0] for n in counts])
        workers = fit(counts, [measured[n][name][1] for n in counts])
        for n in MODELLED:
            c = coordinator[0] + coordinator[1] * n
            w = workers[0] + workers[1] * n
            print(
                f"{name:14} {coordinator[0]:10.3f} + {coordinator[1]:6.3f}·N"
                f" {workers[0]:10.3f} + {workers[1]:6.3f}·N  {n:7d}"
                f"  {1e3 / max(c, 1e-9):13.0f} /s  {n * 1e3 / max(w, 1e-9):10.0f} /s"
            )


if __name__ == "__main__":
    main()
