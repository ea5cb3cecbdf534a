"""Vector catch-up of one person on both backends: does its cost per memory grow?

For each N given, a fresh scratch store per backend gets N memories of ONE
subject (batched through ``oblivio_bench.loading.append_memories``, untimed),
waits until the log can deliver them all, and times
``ProjectionRunner.run_pending()`` from the client's context with the runner's
defaults and the default embedder (wordllama).  The backends alternate (SQLite
first at one N, PostgreSQL first at the next), so the machine's load hits
both alike (``--embedder NAME`` measures another embedder than the default).
Each run prints wall and process CPU seconds per 1,000 memories,
and where the wall time went: reading the log's pages (``read_all``, which
includes the delivery horizon), embedding, writing the vectors, claiming and
moving the checkpoints.  The last lines give PostgreSQL / SQLite at each N.

    python benchmarks/vector_catchup.py 10000 40000 \\
        --database-url postgresql://postgres@127.0.0.1:5432/postgres

The breakdown wraps those calls with timers in this process only; the
catch-up itself runs the shipped path unchanged.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from oblivio_bench.loading import (
    check_applied,
    load_subject,
    open_client,
    scratch_settings,
    wait_until_visible,
)
from projections.embedders import DEFAULT_EMBEDDER, resolve_embedder
from projections.storage import checkpoints
from projections.storage.vector_store import VectorStore

SUBJECT = "catch-up-subject"
#: Where the catch-up's wall time goes: the calls timed, by label.
spent: dict[str, float] = defaultdict(float)


def timing(label: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[label] += time.perf_counter() - start

    return timed


@contextmanager
def breakdown(client: Any) -> Iterator[None]:
    """Time the catch-up's parts on this client (threads add up: 2 on PostgreSQL)."""
    store, embedder = client.context.store, client.context.runner.projection.embedder
    originals = (checkpoints.claim, checkpoints.advance, VectorStore.put_vectors)
    store.read_all = timing("log pages", store.read_all)
    embedder.embed = timing("embedding", embedder.embed)
    checkpoints.claim = timing("checkpoint claim", checkpoints.claim)
    checkpoints.advance = timing("checkpoint advance", checkpoints.advance)
    VectorStore.put_vectors = timing("vector writes", VectorStore.put_vectors)  # type: ignore[method-assign]
    try:
        yield
    finally:
        checkpoints.claim, checkpoints.advance, VectorStore.put_vectors = originals  # type: ignore[method-assign]
        del store.read_all, embedder.embed


def catch_up(backend: str, url: str, memories: int, embedder: str) -> tuple[float, float]:
    """Wall and CPU seconds of one catch-up of ``memories`` on a fresh store."""
    with (
        scratch_settings(backend, url, ["catchup"]) as settings,
        open_client(settings["catchup"], resolve_embedder(embedder)) as client,
    ):
        load_subject(client.context, SUBJECT, memories, random.Random(memories))
        wait_until_visible(client.context, memories)
        spent.clear()
        with breakdown(client):
            wall, cpu = time.perf_counter(), time.process_time()
            applied = client.context.runner.run_pending()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        check_applied(applied, memories)
    per = 1000 / memories
    parts = "  ".join(f"{k} {v * per:.2f}" for k, v in sorted(spent.items()))
    print(
        f"{backend:8} N={memories:>7,}  wall {wall:7.1f} s ({wall * per:.2f} s/1k)  "
        f"cpu {cpu:7.1f} s ({cpu * per:.2f} s/1k)  | s/1k: {parts}",
        flush=True,
    )
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", type=int, nargs="+", help="memories of the one subject")
    parser.add_argument("--database-url", required=True, help="a PostgreSQL server")
    parser.add_argument("--embedder", default=DEFAULT_EMBEDDER, help="by name, as configured")
    args = parser.parse_args()
    results: dict[tuple[str, int], tuple[float, float]] = {}
    for turn, size in enumerate(args.sizes):
        order = ("sqlite", "postgres") if turn % 2 == 0 else ("postgres", "sqlite")
        for backend in order:
            results[backend, size] = catch_up(backend, args.database_url, size, args.embedder)
    for size in args.sizes:
        (pg_wall, pg_cpu), (lite_wall, lite_cpu) = (
            results["postgres", size],
            results["sqlite", size],
        )
        print(
            f"N={size:,}: PostgreSQL / SQLite  wall {pg_wall / lite_wall:.2f}x  "
            f"cpu {pg_cpu / lite_cpu:.2f}x"
        )


if __name__ == "__main__":
    main()
