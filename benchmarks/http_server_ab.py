"""Server CPU per request of two code trees, alternated in one run (an A/B, not a benchmark).

    python benchmarks/http_server_ab.py OLD_TREE NEW_TREE [--rounds 12] [--seconds 3]
        [--operation store|retrieve] [--database-url URL]

Each tree is a checkout of this repository (``git worktree add --detach
/tmp/old <commit>``).  Both servers are ``oblivio serve --no-workers`` on
scratch PostgreSQL databases, started as ``oblivio bench http`` starts its
server, with the tree first on ``PYTHONPATH``; run this from a directory
outside both trees, or Python's own path entry for the working directory
wins.  Each round drives 8 keep-alive clients against one server for the
given seconds, the servers taking turns (A B, then B A), and reads the
server's user and system CPU from ``/proc``.  The medians and the per-round
ratio B/A are printed: on a shared machine only the ratio of adjacent rounds
means much.

Each tree also migrates, seeds and issues the API keys of its own database
(its own ``prepare_server_store``, run with the tree on ``PYTHONPATH``): an
older tree's server cannot write a schema that later migrations changed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from oblivio.settings import Settings
from oblivio_bench import http as bench
from oblivio_bench.eventstore import DEFAULT_SERVER_URL

CLIENTS = 8
SCALE = 0.2

# Run in a child with one tree first on PYTHONPATH.  The benchmark package moved
# out of ``oblivio`` after c3f67e5, so both homes are tried.
PREPARE = f"""
import json, sys
from pathlib import Path
try:
    from oblivio_bench import http as bench
except ImportError:
    from oblivio.bench import http as bench
from oblivio.settings import Settings
url, data_dir = sys.argv[1], Path(sys.argv[2])
config = bench.HttpBenchConfig(
    backend="postgres", clients=({CLIENTS},), scale={SCALE}, server_url=url
)
print(json.dumps(bench.prepare_server_store(Settings(data_dir=data_dir, database_url=url), config)))
"""


def prepare_with_tree(tree: str, settings: Settings, workdir: Path) -> dict[str, str]:
    """Migrate, seed and key one store with the tree's own code; the tokens by user."""
    env = {**bench.server_env(), "PYTHONPATH": str(Path(tree).resolve())}
    args = [sys.executable, "-c", PREPARE, str(settings.database_url), str(settings.data_dir)]
    done = subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True, check=True)
    tokens: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return tokens


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def drive(target: bench.HttpTarget, operation: bench.Operation, seconds: float) -> int:
    """Requests the clients completed in ``seconds``."""
    with target.callers(operation, CLIENTS) as calls:
        for call in calls:
            call(0)  # open the connection first
        stop = time.monotonic() + seconds
        done = [0] * len(calls)

        def client(i: int) -> None:
            while time.monotonic() < stop:
                calls[i](done[i])
                done[i] += 1

        threads = [threading.Thread(target=client, args=(i,)) for i in range(len(calls))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return sum(done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old_tree")
    parser.add_argument("new_tree")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--operation", choices=bench.OPERATIONS, default="store")
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    args = parser.parse_args()
    config = bench.HttpBenchConfig(
        backend="postgres", clients=(CLIENTS,), scale=SCALE, server_url=args.database_url
    )
    trees = {"A": args.old_tree, "B": args.new_tree}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        # Two scratch databases; the bench names them after its two systems.
        settings = stack.enter_context(bench.scratch_settings(config, Path(tmp)))
        stores = dict(zip(trees, settings.values(), strict=True))
        targets = {}
        for name, tree in trees.items():
            tokens = prepare_with_tree(tree, stores[name], Path(tmp))
            os.environ["PYTHONPATH"] = str(Path(tree).resolve())
            server = stack.enter_context(bench.oblivio_server(stores[name], Path(tmp) / name))
            del os.environ["PYTHONPATH"]
            targets[name] = (server.pid, bench.HttpTarget(server, tokens))
        rounds: dict[str, list[tuple[float, float, float]]] = {"A": [], "B": []}
        for round_no in range(args.rounds):
            for name in "AB" if round_no % 2 == 0 else "BA":
                pid, target = targets[name]
                user, system = cpu_seconds(pid)
                started = time.perf_counter()
                requests = drive(target, args.operation, args.seconds)
                elapsed = time.perf_counter() - started
                user_after, system_after = cpu_seconds(pid)
                per_request = 1000 / requests
                rounds[name].append(
                    (
                        requests / elapsed,
                        (user_after - user) * per_request,
                        (system_after - system) * per_request,
                    )
                )
    for name, tree in trees.items():
        rate, user, system = (statistics.median(r[i] for r in rounds[name]) for i in range(3))
        print(
            f"{name} {tree}: {rate:,.0f} req/s, server CPU {user:.3f} user + {system:.3f} "
            f"system ms per request (medians)"
        )
    ratios = [(b[1] + b[2]) / (a[1] + a[2]) for a, b in zip(rounds["A"], rounds["B"], strict=True)]
    print(
        f"server CPU per request B/A, by round: {', '.join(f'{r:.2f}' for r in ratios)}; "
        f"median {statistics.median(ratios):.2f}"
    )


if __name__ == "__main__":
    main()
