"""Load and outside checks on a Citus cluster, shared by the crash and rebalance scripts.

Not a script of its own: ``benchmarks/citus_crash.py`` and
``benchmarks/citus_rebalance.py`` import it.  Everything goes through oblivio's
public API, as a deployment's callers would: writer processes call
``MemoryClient.store``, a forgetter process calls ``MemoryClient.forget``,
the real ``oblivio worker`` command runs the projections and the erasure
rebuilds, and a follower thread reads the whole log with ``EventStore.read_all``.
A failed call is not acknowledged; only what returned is.  Afterwards
:func:`check` compares what was acknowledged with what the cluster holds, and
:func:`scan_nodes` looks for the forgotten subjects' plaintext in every node's
files with the scanner of the single-node at-rest tests (``tests/_at_rest.py``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import secrets
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests._at_rest: the scanner of the single-node tests

from eventstore import START, EventStore, create_backend  # noqa: E402
from oblivio import MemoryClient  # noqa: E402
from oblivio.bootstrap import upgrade_schema  # noqa: E402
from oblivio.settings import Settings  # noqa: E402
from oblivio_bench.citus import CitusCluster, Node, horizon_statement  # noqa: E402
from tests._at_rest import files_below, scan_files  # noqa: E402

#: Connection failures a caller retries after (the cluster is restarting).
RETRY_PAUSE = 0.2


def settings_of(config: dict[str, str]) -> Settings:
    return Settings(
        data_dir=Path(config["data_dir"]),
        database_url=config["database_url"],
        keyring_path=Path(config["keyring_path"]),
    )


def store_config(url: str, tmp: Path) -> dict[str, str]:
    """One store's settings (the coordinator's URL, a data directory, a keyring), as JSON."""
    (tmp / "data").mkdir(exist_ok=True)
    return {
        "data_dir": str(tmp / "data"),
        "database_url": url,
        "keyring_path": str(tmp / "keyring.json"),
    }


def canary() -> str:
    return f"canary-{secrets.token_hex(10)}"


# -- the processes ------------------------------------------------------------------------


def write(config: dict[str, str], writer: int, subjects: list[str], acks: str, stop: str) -> None:
    """Store memories round-robin over ``subjects`` until ``stop`` exists; log each ack."""
    client = MemoryClient(settings=settings_of(config))
    failures: Counter[str] = Counter()  # by the error's first line: what each failure was
    with open(acks, "a") as out:
        n = 0
        while not os.path.exists(stop):
            subject = subjects[(writer + n) % len(subjects)]
            try:
                event_id = client.store(f"note {writer}-{n}", user_id=subject)
            except Exception as e:  # the cluster is down or restarting: not acknowledged
                first_line = str(e).partition("\n")[0][:120]
                failures[f"{type(e).__name__}: {first_line}"] += 1
                time.sleep(RETRY_PAUSE)
                continue
            out.write(f"{event_id} {subject} {time.time():.3f}\n")
            out.flush()  # acknowledged: the call returned
            n += 1
    client.close()
    Path(acks + ".failures").write_text(json.dumps(failures))


def forget_all(config: dict[str, str], subjects: list[str], every: float, acks: str) -> None:
    """Forget ``subjects`` one by one, ``every`` seconds apart, retrying each until it returns.

    ``forget`` of a subject already forgotten returns the earlier request, so a
    retry after a failure that did commit makes no second request.
    """
    client = MemoryClient(settings=settings_of(config))
    with open(acks, "w") as out:
        for subject in subjects:
            while True:
                try:
                    status = client.forget(subject, wait=False)
                    break
                except Exception:
                    time.sleep(RETRY_PAUSE)
            out.write(f"{status.request_id} {subject}\n")
            out.flush()
            time.sleep(every)
    client.close()


def start_oblivio_worker(config: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """The real ``oblivio worker`` (projections, erasure rebuilds, certificates)."""
    env = {
        **os.environ,
        "OBLIVIO_DATABASE_URL": config["database_url"],
        "OBLIVIO_DATA_DIR": config["data_dir"],
        "OBLIVIO_KEYRING": config["keyring_path"],
    }
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "oblivio.cli", "worker"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


class Follower(threading.Thread):
    """Reads the whole log page by page from ``START``, as a projection would, retrying errors."""

    def __init__(self, store: EventStore) -> None:
        super().__init__(daemon=True)
        self.store = store
        self.cursor = START
        self.delivered: list[uuid.UUID] = []
        self.errors = 0
        self.stop = threading.Event()

    def poll(self) -> int:
        page = self.store.read_all(self.cursor, limit=500)
        self.delivered.extend(e.event_id for e in page.events)
        self.cursor = page.next_cursor
        return len(page.events)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                if not self.poll():
                    self.stop.wait(0.05)
            except Exception:
                self.errors += 1
                self.stop.wait(RETRY_PAUSE)


# -- a run ----------------------------------------------------------------------------------


@dataclass
class Load:
    """Writers, a forgetter, an ``oblivio worker`` and a follower on one store."""

    config: dict[str, str]
    tmp: Path
    writers: int
    subjects: list[str]
    forgotten: list[str]
    forget_every: float
    client: MemoryClient
    needles: list[bytes]
    procs: list[Any] = field(default_factory=list)
    worker: subprocess.Popen[bytes] | None = None
    follower: Follower | None = None

    @property
    def stop_file(self) -> str:
        return str(self.tmp / "stop")

    def acks(self, writer: int) -> str:
        return str(self.tmp / f"acks-{writer}")

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        for w in range(self.writers):
            Path(self.acks(w)).touch()
            args = (self.config, w, self.subjects, self.acks(w), self.stop_file)
            self.procs.append(ctx.Process(target=write, args=args))
        forget_args = (self.config, self.forgotten, self.forget_every, str(self.tmp / "forgets"))
        self.procs.append(ctx.Process(target=forget_all, args=forget_args))
        for p in self.procs:
            p.start()
        self.worker = start_oblivio_worker(self.config, self.tmp / "worker.log")
        self.follower = Follower(self.client.context.store)
        self.follower.start()

    def acknowledged(self) -> int:
        return sum(len(Path(self.acks(w)).read_bytes().splitlines()) for w in range(self.writers))

    def wait_for_acks(self, more: int, timeout: float = 120.0) -> float:
        """Seconds until ``more`` further writes are acknowledged (after a restart)."""
        start, target = time.monotonic(), self.acknowledged() + more
        while self.acknowledged() < target:
            if time.monotonic() - start > timeout:
                raise AssertionError(f"no progress within {timeout:.0f} s")
            time.sleep(0.05)
        return time.monotonic() - start

    def finish(self) -> None:
        Path(self.stop_file).touch()
        for p in self.procs:
            p.join(timeout=300)
            assert p.exitcode == 0, f"{p.name} exited with {p.exitcode}"


def seed_forgotten(client: MemoryClient, count: int) -> tuple[list[str], list[bytes]]:
    """``count`` subjects, each with two memories holding canaries; their ids and needles."""
    users, needles = [], []
    for _ in range(count):
        user, first, second = canary(), canary(), canary()
        client.store(f"My locker code is {first}", user_id=user)
        client.store(f"I was born in {second}", user_id=user)
        users.append(user)
        needles += [user.encode(), first.encode(), second.encode()]
    return users, needles


@contextmanager
def load_on(
    cluster: CitusCluster, database: str, tmp: Path, *, writers: int, forgets: int, every: float
) -> Iterator[Load]:
    """A migrated database on ``cluster``, seeded subjects to forget, and the load, running."""
    url = cluster.create_database(database)
    config = store_config(url, tmp)
    backend = create_backend(url)
    upgrade_schema(backend.engine)  # what `oblivio db upgrade` does: the distributed layout
    backend.dispose()
    client = MemoryClient(settings=settings_of(config))
    keep_wal(cluster, database)
    forgotten, needles = seed_forgotten(client, forgets)
    subjects = [f"writer-subject-{i}" for i in range(4 * writers)]
    load = Load(config, tmp, writers, subjects, forgotten, every, client, needles)
    load.start()
    try:
        yield load
    finally:
        Path(load.stop_file).touch()
        if load.follower is not None:
            load.follower.stop.set()
        if load.worker is not None and load.worker.poll() is None:
            load.worker.terminate()
            load.worker.wait(timeout=60)
        for p in load.procs:
            if p.is_alive():
                p.kill()
        with suppress(Exception):
            client.close()


# -- nodes ----------------------------------------------------------------------------------

SLOT = "oblivio_scan_keep"


def keep_wal(cluster: CitusCluster, database: str, nodes: list[Node] | None = None) -> None:
    """A physical replication slot on each node, so no WAL segment written from now on is
    recycled before :func:`scan_nodes` reads it.  Unlike the single-node tests'
    temporary slot it survives the node's crash (kill -9 rounds)."""
    for node in nodes or cluster.nodes:
        cluster.execute(
            node, database, f"SELECT pg_create_physical_replication_slot('{SLOT}', true, false)"
        )


def restart(cluster: CitusCluster, node: Node, timeout: float = 60.0) -> None:
    """Start a killed node again once its orphaned backends are gone (crash recovery)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            cluster.start_node(node)
            return
        except subprocess.CalledProcessError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def node_files(cluster: CitusCluster, node: Node) -> list[Path]:
    """Every file of the node: its data directory (relations, WAL, 2PC state …) and its log."""
    return [*files_below(node.data_dir), cluster.root / f"{node.name}.log"]


def scan_nodes(cluster: CitusCluster, database: str, needles: list[bytes]) -> dict[str, str]:
    """Needles found in each node's files after a CHECKPOINT there, by node name.

    A positive control follows: the first needle, planted in a table of every
    node, must then be found on every node by the same scan.
    """
    found = {}
    for node in cluster.nodes:
        cluster.execute(node, database, "CHECKPOINT")
        files = node_files(cluster, node)
        hits = scan_files(files, needles)
        size = sum(f.stat().st_size for f in files) / 2**20
        found[node.name] = (
            f"{sum(len(h) for h in hits.values())} in {len(files)} files, {size:.0f} MiB"
        )
    control = needles[0].decode()
    for node in cluster.nodes:
        with psycopg.connect(node.url(database), autocommit=True) as conn:
            conn.execute("CREATE TABLE plaintext_control (t text)")
            conn.execute("INSERT INTO plaintext_control VALUES (%s)", (control,))
            conn.execute("CHECKPOINT")
        hits = scan_files(node_files(cluster, node), [needles[0]])
        assert hits, f"the planted control was not found on {node.name}"
    for node in cluster.nodes:
        cluster.execute(node, database, "DROP TABLE plaintext_control")
    return found


def drop_slots(cluster: CitusCluster, database: str) -> None:
    for node in cluster.nodes:
        with suppress(psycopg.Error):
            cluster.execute(node, database, f"SELECT pg_drop_replication_slot('{SLOT}')")


# -- checks ---------------------------------------------------------------------------------


def acked_writes(load: Load) -> dict[uuid.UUID, str]:
    acked = {}
    for w in range(load.writers):
        for line in Path(load.acks(w)).read_text().splitlines():
            event_id, subject, _ = line.split()
            acked[uuid.UUID(event_id)] = subject
    return acked


def acked_forgets(load: Load) -> dict[uuid.UUID, str]:
    lines = (load.tmp / "forgets").read_text().splitlines()
    return {uuid.UUID(r): s for r, s in (line.split() for line in lines)}


def whole_log(store: EventStore) -> list[uuid.UUID]:
    cursor, found = START, []
    while True:
        page = store.read_all(cursor, limit=1000)
        if not page.events:
            return found
        found.extend(e.event_id for e in page.events)
        cursor = page.next_cursor


def settle_erasures(
    load: Load, client: MemoryClient, timeout: float = 300.0
) -> dict[uuid.UUID, str]:
    """Wait until every acknowledged forget is completed (the worker resumes after crashes)."""
    requests = acked_forgets(load)
    deadline = time.monotonic() + timeout
    statuses: dict[uuid.UUID, str] = {}
    while time.monotonic() < deadline:
        statuses = {r: client.erasure_status(r).status for r in requests}
        if all(s in ("completed", "failed") for s in statuses.values()):
            break
        time.sleep(0.5)
    return statuses


def check(load: Load) -> dict[str, Any]:
    """What the cluster holds against what was acknowledged; run after :meth:`Load.finish`."""
    url = load.config["database_url"]
    with psycopg.connect(url, autocommit=True) as conn:
        # Worker parts of two-phase commits a crash left prepared are finished by Citus's
        # recovery every citus.recover_2pc_interval; run it now rather than wait.
        conn.execute("SELECT recover_prepared_transactions()")
    # A client of its own: the load's pooled connections may predate a restart.
    with MemoryClient(settings=settings_of(load.config)) as client:
        return _check(load, client)


def _check(load: Load, client: MemoryClient) -> dict[str, Any]:
    url = load.config["database_url"]
    store = client.context.store
    acked = acked_writes(load)
    found = {e.event_id: e for e in store.get_events(list(acked))}
    statuses = settle_erasures(load, client)
    time.sleep(1.0)  # the follower catches up with the erasures' audit events
    assert load.follower is not None
    follower = load.follower
    deadline = time.monotonic() + 60
    fresh = whole_log(store)
    held_back = 0.0
    while len(follower.delivered) != len(fresh) and time.monotonic() < deadline:
        if len(fresh) < len(follower.delivered):  # a fresh reader is held back: by what?
            held_back = held_back or time.monotonic()
            print(f"a fresh read_all shows {len(fresh)} of {len(follower.delivered)} events")
            print(horizon_report(url))
        time.sleep(0.5)
        fresh = whole_log(store)
    if held_back:
        waited = time.monotonic() - held_back
        print(f"then {len(fresh)} of {len(follower.delivered)}, {waited:.0f} s later")
    follower.stop.set()
    follower.join(timeout=30)
    delivered = follower.delivered
    with psycopg.connect(url, autocommit=True) as conn:
        certificates = dict(
            conn.execute(
                "SELECT request_id, count(*) FROM certificates GROUP BY request_id"
            ).fetchall()
        )
        requests = conn.execute("SELECT count(*) FROM erasure_requests").fetchone()
        retried = conn.execute("SELECT count(*) FROM rebuild_jobs WHERE attempts > 1").fetchone()
    forgets = acked_forgets(load)
    return {
        "acknowledged": len(acked),
        "found": sum(1 for e in acked if e in found and found[e].data is not None),
        "lost": len(set(acked) - set(found)),
        "write_failures": dict(
            sum(
                (
                    Counter(json.loads(Path(load.acks(w) + ".failures").read_text()))
                    for w in range(load.writers)
                ),
                Counter(),
            )
        ),
        "chains_verify": store.verify().ok,
        "log_events": len(fresh),
        "delivered": len(delivered),
        "skipped": len(set(fresh) - set(delivered)),
        "duplicated": len(delivered) - len(set(delivered)),
        "same_order": delivered == fresh,
        "follower_errors": follower.errors,
        "forgets_acknowledged": len(forgets),
        "forgets_completed": sum(1 for s in statuses.values() if s == "completed"),
        "erasure_requests": requests[0] if requests else 0,
        "certificates_per_request": sorted({certificates.get(r, 0) for r in forgets}),
        "certificates_total": sum(certificates.values()),
        "rebuild_jobs_retried": retried[0] if retried else 0,
    }


def horizon_report(url: str) -> str:
    """What holds a fresh reader's horizon back: the horizon against the log's oldest and
    newest commit group, the snapshot, and the coordinator's sessions holding an xid."""
    with psycopg.connect(url, autocommit=True) as conn:
        horizon = conn.execute(horizon_statement()).fetchone()
        groups = conn.execute("SELECT min(commit_group), max(commit_group) FROM events").fetchone()
        snapshot = conn.execute("SELECT pg_current_snapshot()::text").fetchone()
        holders = conn.execute(
            "SELECT pid, datname, backend_type, state, backend_xid::text, backend_xmin::text,"
            " left(query, 50) FROM pg_stat_activity"
            " WHERE backend_xid IS NOT NULL OR backend_xmin IS NOT NULL"
        ).fetchall()
        prepared = conn.execute("SELECT transaction::text, gid, database FROM pg_prepared_xacts")
        return (
            f"horizon {horizon}; commit groups {groups}; snapshot {snapshot};"
            f" sessions with an xid {holders}; prepared {prepared.fetchall()}"
        )


def streams_per_worker(url: str) -> dict[int, int]:
    """How many of the log's streams each worker port holds."""
    with psycopg.connect(url) as conn:
        shards = conn.execute(
            "SELECT get_shard_id_for_distribution_column('events', stream_id), count(*)"
            " FROM (SELECT DISTINCT stream_id FROM events) s GROUP BY 1"
        ).fetchall()
        ports = dict(
            conn.execute(
                "SELECT shardid, nodeport FROM citus_shards WHERE table_name = 'events'::regclass"
            ).fetchall()
        )
    held: dict[int, int] = {}
    for shard, streams in shards:
        held[ports[shard]] = held.get(ports[shard], 0) + streams
    return dict(sorted(held.items()))


def print_figures(figures: dict[str, Any]) -> None:
    print(json.dumps({k: str(v) if isinstance(v, Path) else v for k, v in figures.items()}))
