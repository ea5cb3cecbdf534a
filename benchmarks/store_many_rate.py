"""Memories per second: ``store()``, ``store_many`` and LangGraph's ``PostgresStore``.

    python benchmarks/store_many_rate.py [--backend postgres|sqlite] [--memories 1000]
        [--chunk 500] [--rounds 5] [--database-url URL]

Each round writes ``--memories`` new memories of one person three (or four) ways,
taking turns so that all see the same load: ``MemoryClient.store`` once per memory;
``MemoryClient.store_many`` in chunks of ``--chunk``; and, on PostgreSQL, LangGraph's
``PostgresStore.put`` once per item and ``PostgresStore.batch`` with one ``PutOp`` per
item (no index: it embeds nothing, as ``store()`` embeds nothing either), on a scratch
database of its own.  Prints each system's median rate and the ratios
``store_many / store`` and ``store_many / PostgresStore.put``.

``PostgresStore`` needs ``pip install langgraph-checkpoint-postgres`` (not a dependency
of oblivio); without it the LangGraph rows are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from eventstore.backends.postgres import normalise_postgres_url
from oblivio import MemoryClient

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def text(n: int) -> str:
    return f"Memory {n}: the person mentioned topic {n % 97} on day {n % 31} of the trip"


@contextmanager
def scratch_database(server: str) -> Iterator[str]:
    """A new empty database on ``server``, dropped afterwards: its URL."""
    name = f"oblivio_rate_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(normalise_postgres_url(server), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.engine.make_url(server).set(database=name).render_as_string(False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def oblivio_writers(client: MemoryClient, chunk: int) -> dict[str, Callable[[int, int], None]]:
    """Writers of memories ``start … start + count`` for one person each round."""

    def one_by_one(start: int, count: int) -> None:
        for n in range(start, start + count):
            client.store(text(n), user_id=f"store-{start}")

    def batched(start: int, count: int) -> None:
        memories = [{"content": text(n)} for n in range(start, start + count)]
        for i in range(0, count, chunk):
            client.store_many(memories[i : i + chunk], user_id=f"many-{start}")

    return {"store": one_by_one, "store_many": batched}


def langgraph_writers(url: str, stack: ExitStack) -> dict[str, Callable[[int, int], None]]:
    try:
        from langgraph.store.base import PutOp
        from langgraph.store.postgres import PostgresStore
    except ImportError:
        return {}
    store = stack.enter_context(PostgresStore.from_conn_string(url))
    store.setup()

    def put(start: int, count: int) -> None:
        for n in range(start, start + count):
            store.put(("put", str(start)), f"k{n}", {"text": text(n)}, index=False)

    def batch(start: int, count: int) -> None:
        ops = [
            PutOp(("batch", str(start)), f"k{n}", {"text": text(n)}, index=False)
            for n in range(start, start + count)
        ]
        store.batch(ops)

    return {"PostgresStore.put": put, "PostgresStore.batch": batch}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {}
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        os.environ["OBLIVIO_KEYRING"] = str(scratch / "keyring.json")
        if args.backend == "postgres":
            from oblivio.bootstrap import migrate
            from oblivio.settings import Settings

            url = stack.enter_context(scratch_database(args.database_url))
            settings = Settings(data_dir=scratch, database_url=url)
            migrate(settings)
            client = stack.enter_context(MemoryClient(settings=settings))
            writers = oblivio_writers(client, args.chunk)
            graph_url = stack.enter_context(scratch_database(args.database_url))
            writers |= langgraph_writers(graph_url, stack)
        else:
            client = stack.enter_context(MemoryClient(scratch / "memory"))
            writers = oblivio_writers(client, args.chunk)
        for write in writers.values():
            write(10**9, 20)  # warm up: tables, prepared statements, keys
        for r in range(args.rounds):
            names = list(writers) if r % 2 == 0 else list(reversed(writers))
            for name in names:
                began = time.perf_counter()
                writers[name](r * args.memories, args.memories)
                rates.setdefault(name, []).append(args.memories / (time.perf_counter() - began))
            print(
                f"round {r + 1}: " + ", ".join(f"{n} {rates[n][-1]:,.0f}/s" for n in writers),
                flush=True,
            )
    medians = {name: statistics.median(values) for name, values in rates.items()}
    result: dict[str, Any] = {
        "backend": args.backend,
        "memories_per_round": args.memories,
        "chunk": args.chunk,
        "per_second": medians,
        "store_many / store": medians["store_many"] / medians["store"],
        "load": os.getloadavg()[0],
    }
    if "PostgresStore.put" in medians:
        result["store_many / PostgresStore.put"] = (
            medians["store_many"] / medians["PostgresStore.put"]
        )
        result["store_many / PostgresStore.batch"] = (
            medians["store_many"] / medians["PostgresStore.batch"]
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
