"""Benchmarks of oblivio, run by ``oblivio bench …`` (see ``oblivio_bench.cli``).

``oblivio bench eventstore`` times the event log's appends and reads and, with
``--compare eventsourcing``, runs the same workloads against the
``eventsourcing`` library's default recorders on the same database, round for
round, so that both see the same machine at the same moments.
``oblivio bench memory`` times ``store()``, vector catch-up and retrieval;
``oblivio bench erasure`` times forgetting to a verified certificate and
``delete_event`` as the store grows.  See ``docs/benchmarks.md`` for what
each measures and for results.
"""

from __future__ import annotations

from oblivio_bench.erasure import ErasureBenchConfig, run_erasure_bench
from oblivio_bench.eventstore import (
    DEFAULT_SERVER_URL,
    BenchConfig,
    BenchError,
    run_eventstore_bench,
)
from oblivio_bench.figures import FigureReport
from oblivio_bench.memory import MemoryBenchConfig, run_memory_bench
from oblivio_bench.report import BenchReport

__all__ = [
    "DEFAULT_SERVER_URL",
    "BenchConfig",
    "BenchError",
    "BenchReport",
    "ErasureBenchConfig",
    "FigureReport",
    "MemoryBenchConfig",
    "run_erasure_bench",
    "run_eventstore_bench",
    "run_memory_bench",
]
