"""A/B helpers for the projection runner's commits (not a benchmark command).

``durable NODES ROUNDS``: one subject of NODES memories on a scratch SQLite store
(wordllama), then ROUNDS rounds of "store one memory, time one retrieve"; round by
round the vector projection's batch commits durably (as before ``durable=False``
existed) or not (as shipped), so both halves share the machine's load.  Prints
p50/p90/p99 of each half.

``idle EVENTS``: one subject with one memory, another with EVENTS memories in
another partition, the projection caught up; times the idle partition's page
(what every catch-up and worker poll of that partition costs).  Run it with
``PYTHONPATH`` pointing at an older checkout to compare.

    python benchmarks/projection_commits_ab.py durable 10000 400
    python benchmarks/projection_commits_ab.py idle 50000
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import eventstore.store
from oblivio.client import MemoryClient
from oblivio.settings import Settings
from oblivio_bench.loading import load_subject, memory_texts, query_text
from projections.embedders import DEFAULT_EMBEDDER, resolve_embedder


def scratch_client(embedder: Any) -> MemoryClient:
    data = Path(tempfile.mkdtemp())
    settings = Settings(
        data_dir=data / "data", database_url=None, keyring_path=data / "keyring.json"
    )
    return MemoryClient(settings=settings, embedder=embedder)


def percentiles(label: str, values: list[float]) -> str:
    values = sorted(values)
    p99 = values[max(0, -(-99 * len(values) // 100) - 1)]
    return (
        f"{label}: n={len(values)} p50 {statistics.median(values):.2f} ms  "
        f"p90 {values[int(0.9 * len(values))]:.2f} ms  p99 {p99:.2f} ms"
    )


def durable(nodes: int, rounds: int) -> None:
    forced = {"durable": False}
    original = eventstore.store.EventStore.transaction

    def transaction(
        self: eventstore.store.EventStore, *, durable: bool = True
    ) -> AbstractContextManager[Any]:
        return original(self, durable=durable or forced["durable"])

    eventstore.store.EventStore.transaction = transaction  # type: ignore[assignment,method-assign]
    rng = random.Random(1)
    with scratch_client(resolve_embedder(DEFAULT_EMBEDDER)) as client:
        load_subject(client.context, "u", nodes, rng)
        client.context.runner.run_pending()
        client.retrieve("warm", user_id="u")
        timed: dict[bool, list[float]] = {True: [], False: []}
        for n, text in enumerate(memory_texts(rng, rounds)):
            forced["durable"] = n % 2 == 0
            client.store(text, user_id="u")
            start = time.perf_counter()
            client.retrieve(query_text(rng), user_id="u", limit=10)
            timed[forced["durable"]].append(1000 * (time.perf_counter() - start))
    print(percentiles("durable projection commits", timed[True]))
    print(percentiles("relaxed projection commits", timed[False]))


def idle(events: int) -> None:
    with scratch_client(resolve_embedder("hashing")) as client:
        client.store("one memory", user_id="idle")
        load_subject(client.context, "busy", events, random.Random(1))
        runner = client.context.runner
        runner.run_pending()
        head = client.context.store.head(client.context.namespace, "idle")
        assert head is not None
        partition = runner.partition_of(head.stream.stream_id)
        timed = []
        for _ in range(50):
            start = time.perf_counter()
            runner.follow_page(partition)
            timed.append(1000 * (time.perf_counter() - start))
    print(percentiles(f"idle partition's page after {events:,} other events", timed))


def main(argv: list[str]) -> None:
    if argv[:1] == ["durable"] and len(argv) == 3:
        durable(int(argv[1]), int(argv[2]))
    elif argv[:1] == ["idle"] and len(argv) == 2:
        idle(int(argv[1]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
