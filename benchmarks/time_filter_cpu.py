"""Retrieve with ``as_of`` and filters beside plain retrieve: wall and CPU time.

The time section's subject (10,000 nodes, ``oblivio_bench.time_filters``) on a scratch
store; then rounds of plain, as_of and filters, warm and each right after a store,
interleaved, each timed in wall time and in the retrieving thread's CPU time (the
steadier figure on a shared machine: time spent waiting for a core is not in it).
On PostgreSQL one round trip on an idle connection of the store's autocommit pool
(``SELECT 1``) is timed after each round too: what one wait on the server costs then.
A retrieve's floor is its CPU time plus its waits (counted apart by
``tests/memory/test_retrieve_round_trips.py``) times that cost::

    python benchmarks/time_filter_cpu.py sqlite 150
    python benchmarks/time_filter_cpu.py postgresql://postgres@127.0.0.1:5432/scratch 150
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

from eventstore.backends.port import Backend
from oblivio import MemoryClient
from oblivio.bootstrap import migrate
from oblivio.settings import Settings
from oblivio_bench import time_filters as tf
from oblivio_bench.figures import percentile
from oblivio_bench.loading import (
    LOAD_BATCH,
    append_events,
    check_applied,
    memory_text,
    query_text,
    wait_until_visible,
)

NAMES = ("plain", "as_of", "filters")


def settings_for(target: str) -> Settings:
    data = Path(tempfile.mkdtemp())
    if target == "sqlite":
        return Settings(data_dir=data)
    settings = Settings(data_dir=data, database_url=target, keyring_path=data / "keyring.json")
    migrate(settings)  # a server's schema is upgraded by the operator, not on open
    return settings


def main(target: str, rounds: int) -> None:
    rng = random.Random(7)
    times: dict[tuple[str, bool], tuple[list[float], list[float]]] = {
        (name, after): ([], []) for after in (False, True) for name in NAMES
    }
    trips: list[float] = []
    with MemoryClient(settings=settings_for(target)) as client:
        ctx = client.context
        for _ in range(0, tf.TIME_NODES, LOAD_BATCH):
            append_events(ctx, tf.TIME_SUBJECT, [tf._event(rng) for _ in range(LOAD_BATCH)])
        wait_until_visible(ctx, tf.TIME_NODES)
        check_applied(ctx.runner.run_pending(), tf.TIME_NODES)
        tf._retrieve(client, "warm up", {})
        for _ in range(rounds):
            for (name, after), (wall, cpu) in times.items():
                if after:
                    text, when = memory_text(rng), tf._moment(rng)
                    client.store(text, user_id=tf.TIME_SUBJECT, occurred_at=when)
                wanted, query = tf._filters(rng, name), query_text(rng)
                started, used = time.perf_counter(), time.thread_time()
                tf._retrieve(client, query, wanted)
                cpu.append((time.thread_time() - used) * 1000)
                wall.append((time.perf_counter() - started) * 1000)
            if target != "sqlite":
                trips.append(_round_trip(ctx.store.backend))
    if trips:
        print(f"round trip  p50 {percentile(trips, 50):6.2f} p99 {percentile(trips, 99):6.2f} ms")
    for (name, after), (wall, cpu) in times.items():
        phase = "after store" if after else "warm"
        print(
            f"{name:8} {phase:11}  wall p50 {percentile(wall, 50):6.1f} p99 "
            f"{percentile(wall, 99):6.1f}   cpu p50 {percentile(cpu, 50):6.1f} p99 "
            f"{percentile(cpu, 99):6.1f} ms"
        )


def _round_trip(backend: Backend) -> float:
    """Milliseconds of one trivial statement on a pooled connection (no BEGIN: autocommit)."""
    with backend.statement_reads() as conn:
        started = time.perf_counter()
        conn.execute(sa.text("SELECT 1"))
        return (time.perf_counter() - started) * 1000


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
