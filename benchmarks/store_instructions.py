"""Instructions a ``store()`` costs its calling thread, counted by callgrind, tree by tree.

    python benchmarks/store_instructions.py TREE [TREE ...] [--stores 200] [--rounds 3]
        [--floor] [--database-url URL]

On a shared, loaded machine the CPU time of a store moves by tens of per cent from
one batch to the next; the instructions its thread executes do not.  For each tree
(a checkout of this repository with its own ``TREE/.venv``, as for
``benchmarks/store_ab.py``; ``c3f67e5`` works too) one process runs under
``valgrind --tool=callgrind`` with instrumentation off: it migrates a scratch
PostgreSQL database of its own with the tree's ``oblivio db upgrade``, opens a
``MemoryClient`` and stores 40 memories for four users (the streams created, the
statements prepared, each user's head remembered).  Then, ``--rounds`` times, this
script switches the count on (``callgrind_control``), lets the process store
``--stores`` memories with ``MemoryClient.store``, dumps the count and switches it
off.  ``--floor`` adds, in the same process and turn by turn, the same number of
stores by the floor of ``benchmarks/store_floor.py`` (trees that have it), the
design's required work sent with the driver directly.

Printed per tree: thousands of instructions a store of the process's main thread
(``--separate-threads``: a background thread's work is left out; none ran during
the counted stores in the runs of docs/benchmarks.md), the median and the range of
the rounds.  The first round of a process may count a little more (a collection of
the garbage collector's oldest generation).  Run it from a directory outside the
trees, with ``PYTHONHASHSEED=0`` for counts that repeat across processes to a few
tenths of a per cent.  Each round of 200 stores takes about 20 s under valgrind.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

# The program each tree's process runs: setup, "ready PID", then one loop of
# stores per line read ("product N" or "floor N"), answered by "done".
_CHILD = r"""
import os, sys, uuid, subprocess
from pathlib import Path
import sqlalchemy as sa
from oblivio import MemoryClient

tree, server = Path(sys.argv[1]), sys.argv[2]
sys.path.insert(0, str(tree / "benchmarks"))
admin_url = "postgresql+psycopg://" + server.split("://", 1)[1]
name = f"oblivio_instr_{uuid.uuid4().hex[:12]}"
admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
with admin.connect() as conn:
    conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
url = sa.engine.make_url(server).set(database=name).render_as_string(False)
try:
    subprocess.run([str(tree / ".venv" / "bin" / "oblivio"), "--database-url", url,
                    "db", "upgrade"], check=True, capture_output=True)
    client = MemoryClient(database_url=url)
    floor = None
    if (tree / "benchmarks" / "store_floor.py").exists():
        import store_floor
        floor = store_floor.FloorStore(client)

    def text(n):
        return f"Memory {n}: the person mentioned topic {n % 97} on day {n % 31} of the trip"

    for n in range(40):
        client.store(text(n), user_id=f"user-{n % 4}")
        if floor is not None:
            floor.store_one(text(n), f"user-{n % 4}")
    done = 40
    print("ready", os.getpid(), flush=True)
    for line in sys.stdin:
        which, size = line.split()
        for n in range(done, done + int(size)):
            if which == "product":
                client.store(text(n), user_id=f"user-{n % 4}")
            else:
                floor.store_one(text(n), f"user-{n % 4}")
        done += int(size)
        print("done", flush=True)
    client.close()
finally:
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
"""


def count_tree(
    tree: Path, server: str, stores: int, rounds: int, floor: bool, scratch: Path
) -> dict[str, list[float]]:
    """Thousands of instructions a store of ``tree``'s main thread, per round, for
    ``product`` (and ``floor``); ``scratch`` is the tree's own directory."""
    scratch.mkdir()
    out = scratch / "store.cg"
    python = tree / ".venv" / "bin" / "python"
    env = os.environ | {"OBLIVIO_KEYRING": str(scratch / "keyring.json")}
    env.pop("PYTHONPATH", None)
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes"]
    command += [f"--callgrind-out-file={out}", str(python), "-c", _CHILD, str(tree), server]
    child = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=scratch,
        env=env,
    )
    assert child.stdin is not None
    assert child.stdout is not None
    line = child.stdout.readline()
    if not line.startswith("ready"):
        raise RuntimeError(f"{tree}: the client did not start")
    pid = line.split()[1]

    def control(*args: str) -> None:
        subprocess.run(["callgrind_control", *args, pid], check=True, capture_output=True)

    has_floor = (tree / "benchmarks" / "store_floor.py").exists()
    labels = ["product", "floor"] if floor and has_floor else ["product"]
    for _ in range(rounds):
        for label in labels:
            control("--instr=on")
            child.stdin.write(f"{label} {stores}\n")
            child.stdin.flush()
            if child.stdout.readline().strip() != "done":
                raise RuntimeError(f"{tree}: the stores failed")
            control(f"--dump={label}")
            control("--instr=off")
    child.stdin.close()
    child.wait(timeout=600)
    return _main_thread_counts(out, stores)


def _main_thread_counts(out: Path, stores: int) -> dict[str, list[float]]:
    """Each dump's main-thread total (``OUT.N-01``), per label, in thousands a store."""
    counts: dict[str, list[float]] = {}
    dumps = sorted(glob.glob(f"{out}.*-01"), key=lambda f: int(f.rsplit(".", 1)[1][:-3]))
    for dump in dumps:
        text = Path(dump).read_text()
        label = re.search(r"^desc: Trigger: .*?dump (\S+)$", text, re.M)
        total = re.search(r"^totals: (\d+)$", text, re.M)
        if label and total:
            counts.setdefault(label.group(1), []).append(int(total.group(1)) / stores / 1e3)
    return counts


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", type=Path, nargs="+")
    parser.add_argument("--stores", type=int, default=200, help="stores a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--floor", action="store_true", help="also the floor, where a tree has it")
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for n, tree in enumerate(args.trees):
            tree = tree.resolve()
            own = Path(scratch) / str(n)
            counts = count_tree(tree, args.database_url, args.stores, args.rounds, args.floor, own)
            for label, values in counts.items():
                median = statistics.median(values)
                result[f"{tree} {label}"] = median
                print(
                    f"{tree} {label}: {median:.1f} k instructions a store "
                    f"({min(values):.1f}-{max(values):.1f}, {len(values)} rounds)",
                    flush=True,
                )
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
