"""Server CPU per request of two code trees, alternated in one run (an A/B, not a benchmark).

    python benchmarks/http_server_ab.py OLD_TREE NEW_TREE [--rounds 12] [--seconds 3]
        [--operation store|retrieve] [--database-url URL] [--floor]

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

``--floor`` (store only) adds a third server, F, to every round: the FastAPI
floor (``benchmarks/http_floor_server.py``), a bare FastAPI app on the same
uvicorn setup whose one sync route calls NEW_TREE's ``store()`` with no
authentication, dependencies, middleware or response model.  Its ratio to A
says how close to OLD_TREE any FastAPI route can come on this machine.

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
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from oblivio.settings import Settings
from oblivio_bench import http as bench
from oblivio_bench.eventstore import DEFAULT_SERVER_URL
from oblivio_bench.scratch import postgres_databases

CLIENTS = 8
SCALE = 0.2
FLOOR_SERVER = Path(__file__).resolve().with_name("http_floor_server.py")

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


@contextmanager
def floor_server(
    tree: str, settings: Settings, tokens: dict[str, str], workdir: Path
) -> Iterator[bench.RunningServer]:
    """The FastAPI floor on ``settings``' store, with ``tree`` first on ``PYTHONPATH``."""
    port = bench.free_port()
    tokens_file = workdir / "floor-tokens.json"
    tokens_file.write_text(json.dumps(tokens))
    args = [sys.executable, str(FLOOR_SERVER), str(settings.data_dir)]
    args += [str(settings.database_url), str(port), str(tokens_file)]
    env = {**bench.server_env(), "PYTHONPATH": str(Path(tree).resolve())}
    log_path = workdir / "floor.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            args, cwd=workdir, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env
        )
    try:
        base_url = f"http://{bench.LOOPBACK}:{port}"
        bench.wait_until_healthy(base_url, process, log_path)
        yield bench.RunningServer(base_url, process.pid)
    finally:
        bench.stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old_tree")
    parser.add_argument("new_tree")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--operation", choices=bench.OPERATIONS, default="store")
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    parser.add_argument("--floor", action="store_true", help="add the FastAPI floor (store)")
    args = parser.parse_args()
    if args.floor and args.operation != "store":
        parser.error("--floor measures the store route only")
    trees = {"A": args.old_tree, "B": args.new_tree}
    names = "ABF" if args.floor else "AB"
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        # Database names are lower case: one scratch database per server.
        urls = stack.enter_context(postgres_databases(args.database_url, names.lower()))
        stores = {n: Settings(data_dir=Path(tmp) / n, database_url=urls[n.lower()]) for n in names}
        targets = {}
        for name in names:
            tree = trees.get(name, args.new_tree)
            tokens = prepare_with_tree(tree, stores[name], Path(tmp))
            if name == "F":
                server = stack.enter_context(floor_server(tree, stores[name], tokens, Path(tmp)))
            else:
                os.environ["PYTHONPATH"] = str(Path(tree).resolve())
                log = Path(tmp) / f"{name}.log"
                server = stack.enter_context(bench.oblivio_server(stores[name], log))
                del os.environ["PYTHONPATH"]
            targets[name] = (server.pid, bench.HttpTarget(server, tokens))
        rounds: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
        for round_no in range(args.rounds):
            for name in names if round_no % 2 == 0 else names[::-1]:
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
    labels = {**trees, "F": f"FastAPI floor on {args.new_tree}"}
    for name in names:
        rate, user, system = (statistics.median(r[i] for r in rounds[name]) for i in range(3))
        print(
            f"{name} {labels[name]}: {rate:,.0f} req/s, server CPU {user:.3f} user + "
            f"{system:.3f} system ms per request (medians)"
        )
    for name in names[1:]:
        report_ratios(name, rounds["A"], rounds[name])


def report_ratios(
    name: str, old: list[tuple[float, float, float]], new: list[tuple[float, float, float]]
) -> None:
    """Per-round ratios of ``name`` to A: requests a second, and server CPU a request."""
    pairs = list(zip(old, new, strict=True))
    for figure, ratios in (
        ("req/s", [b[0] / a[0] for a, b in pairs]),
        ("server CPU per request", [(b[1] + b[2]) / (a[1] + a[2]) for a, b in pairs]),
    ):
        print(
            f"{figure} {name}/A, by round: {', '.join(f'{r:.2f}' for r in ratios)}; "
            f"median {statistics.median(ratios):.2f}"
        )


if __name__ == "__main__":
    main()
