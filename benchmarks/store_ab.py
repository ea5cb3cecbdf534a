"""``store()`` of two code trees, alternated in one run (an A/B, not a benchmark).

    python benchmarks/store_ab.py OLD_TREE NEW_TREE [--backend sqlite|postgres]
        [--rounds 12] [--batch 200] [--users 4] [--database-url URL] [--many]

Each tree is a checkout of this repository with its own virtual environment
in ``TREE/.venv`` (``git worktree add --detach /tmp/old <commit>``, then
``python -m venv .venv && .venv/bin/pip install -e '.[test]'`` in it).  One
long-lived process per tree opens a ``MemoryClient`` (SQLite in a scratch
directory, or a scratch PostgreSQL database of its own migrated by that
tree's ``oblivio db upgrade``) and, when told, stores a batch of memories
for a few users and reports its wall and CPU time.  The processes take turns
(A B, then B A), so both see the same load; the per-round ratio of the two
rates (NEW / OLD: above 1 the new tree is faster) and their medians are
printed.  ``--many`` makes NEW store each batch with one ``store_many`` call
per user instead (a tree that has it), for the batch's rate against
``store()``.

Run it from a directory outside both trees (each process starts with its
tree's interpreter, in a scratch directory).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

# The process each tree runs: one client, then a batch per line read.  Plain
# ``store`` and ``store_many`` calls of the public facade, nothing else.
_CHILD = r"""
import json, sys, time
from oblivio import MemoryClient

where, users, many = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "many"
client = MemoryClient(where) if "://" not in where else MemoryClient(database_url=where)
done = 0

def text(n):
    return f"Memory {n}: the person mentioned topic {n % 97} on day {n % 31} of the trip"

def batch(size):
    global done
    if many:
        per_user = {}
        for n in range(done, done + size):
            per_user.setdefault(f"user-{n % users}", []).append({"content": text(n)})
        for user, memories in per_user.items():
            client.store_many(memories, user_id=user)
    else:
        for n in range(done, done + size):
            client.store(text(n), user_id=f"user-{n % users}")
    done += size

batch(users * 5)  # warm up: streams exist, statements prepared, keys unwrapped
print("ready", flush=True)
for line in sys.stdin:
    size = int(line)
    wall, cpu = time.perf_counter(), time.process_time()
    batch(size)
    print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu]), flush=True)
client.close()
"""


class Tree:
    """One tree's process: its client on its own scratch store."""

    def __init__(
        self,
        tree: Path,
        where: str,
        users: int,
        many: bool,
        env: dict[str, str],
        child: str = _CHILD,
    ):
        """``child``: the program the tree's interpreter runs (``benchmarks/store_floor.py``
        gives its own, which answers the same lines)."""
        python = tree / ".venv" / "bin" / "python"
        args = [str(python), "-c", child, where, str(users), "many" if many else "one"]
        self.process = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=env["SCRATCH"],
            env=env,
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline().strip()
        if ready != "ready":
            raise RuntimeError(f"{tree}: the client did not start")

    def run(self, size: int) -> tuple[float, float]:
        """Seconds of wall and CPU time the batch took."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(f"{size}\n")
        self.process.stdin.flush()
        wall, cpu = json.loads(self.process.stdout.readline())
        return wall, cpu

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def _scratch_database(server: str, tree: Path, keyring: Path) -> tuple[str, str]:
    """A new database on ``server`` migrated by ``tree``: its URL and name."""
    import sqlalchemy as sa

    from eventstore.backends.postgres import normalise_postgres_url

    name = f"oblivio_ab_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(normalise_postgres_url(server), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    url = sa.engine.make_url(server).set(database=name).render_as_string(False)
    env = os.environ | {"OBLIVIO_KEYRING": str(keyring)}
    oblivio = tree / ".venv" / "bin" / "oblivio"
    subprocess.run([str(oblivio), "--database-url", url, "db", "upgrade"], check=True, env=env)
    return url, name


def _drop_database(server: str, name: str) -> None:
    import sqlalchemy as sa

    from eventstore.backends.postgres import normalise_postgres_url

    admin = sa.create_engine(normalise_postgres_url(server), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


def alternate(
    trees: dict[str, tuple[Path, str]],
    backend: str,
    database_url: str,
    rounds: int,
    batch: int,
    users: int,
    many: frozenset[str] = frozenset(),
) -> tuple[dict[str, list[float]], dict[str, list[float]], list[float]]:
    """Two labelled processes (``{label: (tree, child program)}``, old first), each on a
    scratch store of its own, storing ``batch`` memories in turn for ``rounds`` rounds:
    each label's rates (per s) and CPU (ms a store), and the ratios second / first."""
    (first, _), (second, _) = trees.items()
    rates: dict[str, list[float]] = {label: [] for label in trees}
    cpu: dict[str, list[float]] = {label: [] for label in trees}
    ratios: list[float] = []
    databases: list[str] = []
    processes: dict[str, Tree] = {}
    with tempfile.TemporaryDirectory() as scratch:
        try:
            for label, (tree, child) in trees.items():
                keyring = Path(scratch) / f"{label}-keyring.json"
                env = os.environ | {"OBLIVIO_KEYRING": str(keyring), "SCRATCH": scratch}
                env.pop("PYTHONPATH", None)
                if backend == "postgres":
                    where, name = _scratch_database(database_url, tree, keyring)
                    databases.append(name)
                else:
                    where = str(Path(scratch) / f"{label}-memory")
                processes[label] = Tree(tree, where, users, label in many, env, child)
            for n in range(rounds):
                for label in [first, second] if n % 2 == 0 else [second, first]:
                    wall, used = processes[label].run(batch)
                    rates[label].append(batch / wall)
                    cpu[label].append(used / batch * 1e3)
                ratios.append(rates[second][-1] / rates[first][-1])
                print(
                    f"round {n + 1}: "
                    + " ".join(
                        f"{label} {rates[label][-1]:.0f}/s ({cpu[label][-1]:.2f} ms CPU)"
                        for label in trees
                    )
                    + f" ratio {ratios[-1]:.2f}",
                    flush=True,
                )
        finally:
            for process in processes.values():
                process.close()
            for name in databases:
                _drop_database(database_url, name)
    return rates, cpu, ratios


def summary(
    backend: str,
    rates: dict[str, list[float]],
    cpu: dict[str, list[float]],
    ratios: list[float],
) -> dict[str, Any]:
    """Medians of each label's rate and CPU a store, the ratios' median and range, the load."""
    result: dict[str, Any] = {"backend": backend}
    for label in rates:
        result[f"{label}_per_s"] = statistics.median(rates[label])
    for label in cpu:
        result[f"{label}_cpu_ms"] = statistics.median(cpu[label])
    result["ratio_median"] = statistics.median(ratios)
    result["ratio_range"] = [min(ratios), max(ratios)]
    result["load"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--batch", type=int, default=200, help="memories per turn")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    parser.add_argument("--many", action="store_true", help="NEW stores with store_many")
    args = parser.parse_args(argv)
    trees = {"old": (args.old.resolve(), _CHILD), "new": (args.new.resolve(), _CHILD)}
    many = frozenset({"new"} if args.many else ())
    rates, cpu, ratios = alternate(
        trees, args.backend, args.database_url, args.rounds, args.batch, args.users, many
    )
    return summary(args.backend, rates, cpu, ratios)


if __name__ == "__main__":
    main(sys.argv[1:])
