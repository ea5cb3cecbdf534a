"""A throwaway Citus cluster on loopback: a coordinator and workers started with ``initdb``.

Citus is an extension of a database server the operator runs, not a Python
dependency, so oblivio's tests and benchmarks start such a cluster themselves
from the extension installed into the machine's PostgreSQL
(``../shared/vendor/citus/build.sh`` builds it).  Every node is a cluster of
its own in a temporary directory, on a free loopback port, run by a non-root
OS user when this process is root (``initdb`` and ``postgres`` refuse root).
Readiness is waited for with ``pg_ctl start --wait`` (which polls the server
until it accepts connections), never with a fixed sleep.

A cluster holds any number of *databases*; :meth:`CitusCluster.create_database`
creates one on every node, installs the extension there and registers the
workers with the coordinator, which is what ``create_distributed_table`` needs.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from eventstore.backends.citus import _CLUSTER_HORIZON

#: The user that runs the nodes when this process is root.
NODE_USER = "postgres"
HOST = "127.0.0.1"


class CitusUnavailableError(RuntimeError):
    """No PostgreSQL with the Citus extension on this machine."""


def pg_bindir() -> Path:
    """The binaries of the newest PostgreSQL installed (Debian's layout), or of ``pg_config``."""
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_config"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    pg_config = str(versions[-1]) if versions else shutil.which("pg_config")
    if pg_config is None:
        raise CitusUnavailableError("no PostgreSQL server binaries (pg_config) on this machine")
    out = subprocess.run(  # noqa: S603 (the machine's own pg_config)
        [pg_config, "--bindir", "--pkglibdir"], capture_output=True, text=True, check=True
    )
    bindir, pkglibdir = out.stdout.split()
    if not (Path(pkglibdir) / "citus.so").exists():
        raise CitusUnavailableError(
            f"the Citus extension is not installed in {pkglibdir}"
            " (run ../shared/vendor/citus/build.sh)"
        )
    return Path(bindir)


def free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Node:
    name: str
    port: int
    data_dir: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{NODE_USER}@{HOST}:{self.port}/{database}"


@dataclass
class CitusCluster:
    """A coordinator and ``workers`` worker nodes; :func:`citus_cluster` starts and removes one."""

    root: Path
    bindir: Path
    coordinator: Node
    workers: list[Node] = field(default_factory=list)
    shard_count: int = 32
    durable: bool = True

    @property
    def nodes(self) -> list[Node]:
        return [self.coordinator, *self.workers]

    def url(self, database: str = "postgres") -> str:
        """Where oblivio connects: the coordinator."""
        return self.coordinator.url(database)

    # -- node processes -------------------------------------------------------------

    def _run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        command = [str(a) for a in args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", NODE_USER, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, check=True)  # noqa: S603

    def _conf(self, node: Node) -> str:
        lines = [
            "shared_preload_libraries = 'citus'",
            f"port = {node.port}",
            f"listen_addresses = '{HOST}'",
            f"unix_socket_directories = '{self.root}'",
            "shared_buffers = 32MB",
            "max_connections = 200",
            # Prepared transactions: Citus commits a transaction that wrote
            # to several nodes with two-phase commit.
            "max_prepared_transactions = 100",
            f"citus.shard_count = {self.shard_count}",
            "wal_level = logical",  # shard moves (rebalancing) use logical replication
            "log_min_messages = warning",
        ]
        if not self.durable:
            lines += ["fsync = off", "synchronous_commit = off", "full_page_writes = off"]
        return "\n".join(lines) + "\n"

    def init_node(self, node: Node) -> None:
        self._run(
            self.bindir / "initdb", "-D", node.data_dir, "-U", NODE_USER, "--auth=trust",
            "--no-sync", "-E", "UTF8", "--locale=C",
        )  # fmt: skip
        with (node.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(self._conf(node))

    def start_node(self, node: Node) -> None:
        # --wait polls until the server accepts connections (or fails).
        self._run(
            self.bindir / "pg_ctl", "start", "--wait", "-t", "120", "-D", node.data_dir,
            "-l", self.root / f"{node.name}.log",
        )  # fmt: skip

    def stop_node(self, node: Node, mode: str = "fast") -> None:
        self._run(self.bindir / "pg_ctl", "stop", "--wait", "-m", mode, "-D", node.data_dir)

    def kill_node(self, node: Node) -> None:
        """SIGKILL the node's postmaster (a crash), as ``kill -9`` would."""
        pid = int((node.data_dir / "postmaster.pid").read_text().split()[0])
        os.kill(pid, 9)

    def add_worker(self) -> Node:
        """Initialise and start one more worker node (not yet in any database)."""
        node = Node(f"worker{len(self.workers) + 1}", free_port(), self._dir())
        self.init_node(node)
        self.start_node(node)
        self.workers.append(node)
        return node

    def _dir(self) -> Path:
        path = Path(tempfile.mkdtemp(prefix="node-", dir=self.root))
        _give_to_node_user(path)
        return path

    # -- databases --------------------------------------------------------------------

    def execute(self, node: Node, database: str, *sql: str) -> None:
        with psycopg.connect(node.url(database), autocommit=True) as conn:
            for statement in sql:
                conn.execute(statement.encode())

    def create_database(self, name: str) -> str:
        """A database on every node with the extension and the workers registered; its URL."""

        def prepare(node: Node) -> None:
            self.execute(node, "postgres", f'CREATE DATABASE "{name}"')
            self.execute(node, name, "CREATE EXTENSION citus")

        on_every_node(prepare, self.nodes)
        self.execute(
            self.coordinator,
            name,
            f"SELECT citus_set_coordinator_host('{HOST}', {self.coordinator.port})",
            *(f"SELECT citus_add_node('{HOST}', {w.port})" for w in self.workers),
        )
        return self.url(name)

    def add_node_to_database(self, node: Node, name: str) -> None:
        """Make ``node`` a worker of the database ``name`` (shards move only on a rebalance)."""
        self.execute(node, "postgres", f'CREATE DATABASE "{name}"')
        self.execute(node, name, "CREATE EXTENSION citus")
        self.execute(self.coordinator, name, f"SELECT citus_add_node('{HOST}', {node.port})")

    def drop_database(self, name: str) -> None:
        for node in reversed(self.nodes):
            self.execute(node, "postgres", f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def on_every_node(step: Callable[[Node], None], nodes: Sequence[Node]) -> None:
    """Run ``step`` for every node at once: each waits on its own server (initdb, start,
    CREATE EXTENSION), so the nodes need not wait for each other."""
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        for done in [pool.submit(step, node) for node in nodes]:
            done.result()  # re-raises the step's error


def _give_to_node_user(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(NODE_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


@contextmanager
def citus_cluster(
    workers: int = 2, *, shard_count: int = 32, durable: bool = True, root: Path | None = None
) -> Iterator[CitusCluster]:
    """Start a coordinator and ``workers`` workers; stop them and remove their files at exit.

    ``durable=False`` turns fsync off, which suits tests (a crash of the
    machine loses the throwaway cluster anyway); crash benchmarks keep it on.
    Raises :class:`CitusUnavailableError` when the extension is not installed.
    """
    bindir = pg_bindir()
    base = Path(tempfile.mkdtemp(prefix="oblivio-citus-", dir=root))
    _give_to_node_user(base)
    base.chmod(0o755)
    cluster = CitusCluster(
        root=base,
        bindir=bindir,
        coordinator=Node("coordinator", free_port(), base / "coordinator"),
        shard_count=shard_count,
        durable=durable,
    )
    try:
        cluster.coordinator.data_dir.mkdir()
        _give_to_node_user(cluster.coordinator.data_dir)
        cluster.workers = [
            Node(f"worker{n}", free_port(), cluster._dir()) for n in range(1, workers + 1)
        ]
        on_every_node(cluster.init_node, cluster.nodes)
        on_every_node(cluster.start_node, cluster.nodes)
        yield cluster
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"{' '.join(map(str, e.cmd))} failed: {e.stderr or e.stdout}") from e
    finally:
        for node in cluster.nodes:
            if (node.data_dir / "postmaster.pid").exists():
                _stop_quietly(cluster, node)
        shutil.rmtree(base, ignore_errors=True)


def _stop_quietly(cluster: CitusCluster, node: Node) -> None:
    with suppress(subprocess.CalledProcessError):  # already down (a test killed it)
        cluster.stop_node(node, mode="immediate")


def node_data_dirs(cluster: CitusCluster) -> Sequence[Path]:
    return [n.data_dir for n in cluster.nodes]


def horizon_statement(floor: int = 0) -> bytes:
    """The coordinator's part of the cluster horizon (``eventstore.backends.citus``) for
    psycopg, with its ``floor`` (the commit group below which a read needs no worker
    asked) filled in: the horizon before any worker is asked, and the 2PC records
    the workers would be asked about, one row each."""
    return _CLUSTER_HORIZON.text.replace(":floor", str(int(floor))).encode()


def node_cpu(node: Node) -> float:
    """Seconds of CPU the node's processes have used: the postmaster's reaped children
    (backends that ended, such as the short-lived ones ``master_run_on_worker`` starts)
    and every live child (Linux ``/proc``; the figures of a benchmark, not of a test)."""
    ticks = 0
    postmaster = int((node.data_dir / "postmaster.pid").read_text().split()[0])
    fields = Path(f"/proc/{postmaster}/stat").read_text().rsplit(")", 1)[1].split()
    ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    for child in Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split():
        with suppress(FileNotFoundError):  # ended since: in the postmaster's cutime next time
            stat = Path(f"/proc/{child}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(stat[11]) + int(stat[12])
    return ticks / os.sysconf("SC_CLK_TCK")
