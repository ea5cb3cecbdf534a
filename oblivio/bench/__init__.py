"""Benchmarks of oblivio, run by ``oblivio bench …``.

``oblivio bench eventstore`` times the event log's appends and reads and, with
``--compare eventsourcing``, runs the same workloads against the
``eventsourcing`` library's default recorders on the same database, round for
round, so that both see the same machine at the same moments.  See
``docs/benchmarks.md`` for what each workload measures and for results.
"""

from __future__ import annotations

from oblivio.bench.eventstore import (
    DEFAULT_SERVER_URL,
    BenchConfig,
    BenchError,
    run_eventstore_bench,
)
from oblivio.bench.report import BenchReport

__all__ = [
    "DEFAULT_SERVER_URL",
    "BenchConfig",
    "BenchError",
    "BenchReport",
    "run_eventstore_bench",
]
