"""``oblivio bench eventstore``: the log's appends and reads, optionally beside eventsourcing.

Every system gets a scratch database of its own on the chosen backend.  Data
the read workloads need is written first (not timed); then each workload runs
its rounds with the systems interleaved (A B A B …), so that drift on a
shared, noisy machine hits every system alike, and the report gives medians.
"""

from __future__ import annotations

import gc
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oblivio_bench.config import BACKENDS, CITUS, DEFAULT_SERVER_URL, WITH_CITUS, RunConfig
from oblivio_bench.report import BenchReport, WorkloadResult, load_average, machine_info
from oblivio_bench.scratch import citus_databases, postgres_databases, postgres_version
from oblivio_bench.systems import BenchError, OblivioSystem, Session, System
from oblivio_bench.workloads import (
    AppendWorkload,
    ReadLogWorkload,
    ReadStreamWorkload,
    Workload,
)

COMPARABLE = ("eventsourcing",)

# Sizes at --scale 1.
SINGLE_EVENTS, SINGLE_STREAMS = 2_000, 100
BATCH_EVENTS, BATCH_SIZE, BATCH_STREAMS = 10_000, 100, 20
WRITERS = 4
STREAM_EVENTS, STREAM_READS = 1_000, 10
LOG_EVENTS, LOG_PAGE, LOG_STREAMS = 20_000, 500, 100

Progress = Callable[[str], None]

__all__ = [
    "BACKENDS",
    "COMPARABLE",
    "DEFAULT_SERVER_URL",
    "BenchConfig",
    "BenchError",
    "run_eventstore_bench",
    "standard_workloads",
]


@dataclass(frozen=True)
class BenchConfig(RunConfig):
    """What to run: backend, the library to compare with, rounds and size."""

    backends = WITH_CITUS
    compare: str | None = None
    #: Python's cyclic garbage collector runs during timed rounds (as it does
    #: in any process); ``False`` pauses it in this process while a round is
    #: timed and collects between rounds, which leaves the CPU work alone.
    gc_in_rounds: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.compare is not None and self.compare not in COMPARABLE:
            raise BenchError(f"--compare supports {', '.join(COMPARABLE)}")
        if self.compare is not None and self.backend == CITUS:
            raise BenchError("--backend citus compares with one PostgreSQL server, not --compare")


def standard_workloads(scale: float = 1.0) -> list[Workload]:
    """The five workloads of the issue, their event counts multiplied by ``scale``."""

    def n(count: int, least: int = 1) -> int:
        return max(least, round(count * scale))

    return [
        AppendWorkload(
            name="append_single",
            title="append 1 event/tx, 1 writer",
            op="transaction",
            events=n(SINGLE_EVENTS),
            streams=n(SINGLE_STREAMS),
            batch_size=1,
        ),
        AppendWorkload(
            name="append_batch",
            title=f"append {BATCH_SIZE}-event batches, 1 writer",
            op=f"transaction of {BATCH_SIZE} events",
            events=n(BATCH_EVENTS),
            streams=n(BATCH_STREAMS),
            batch_size=BATCH_SIZE,
        ),
        AppendWorkload(
            name="append_4_writers",
            title=f"append 1 event/tx, {WRITERS} writer processes",
            op="transaction (mean wait of one writer)",
            heavy=True,
            events=n(SINGLE_EVENTS),
            streams=n(SINGLE_STREAMS, WRITERS),
            batch_size=1,
            writers=WRITERS,
        ),
        ReadStreamWorkload(
            name="read_stream",
            title=f"read one {n(STREAM_EVENTS):,}-event stream",
            op="read of the whole stream",
            events=n(STREAM_EVENTS),
            reads=STREAM_READS,
        ),
        ReadLogWorkload(
            name="read_log",
            title=f"read the global log, pages of {LOG_PAGE}",
            op=f"page of {LOG_PAGE} events",
            events=n(LOG_EVENTS),
            page_size=LOG_PAGE,
            seed_streams=n(LOG_STREAMS),
        ),
    ]


def run_eventstore_bench(config: BenchConfig, progress: Progress = lambda _: None) -> BenchReport:
    """Run every workload on scratch databases and return the figures."""
    workloads = standard_workloads(config.scale)
    with scratch_systems(config) as systems:
        server = postgres_version(config.server_url) if config.backend != "sqlite" else None
        machine = machine_info(server)
        results = run_workloads(workloads, systems, config.rounds, progress, config.gc_in_rounds)
        machine["load_average_end"] = load_average()
        machine["gc_in_rounds"] = config.gc_in_rounds
    notes = {system.name: system.notes for system in systems}
    return BenchReport(config, machine, notes, results)


@contextmanager
def scratch_systems(config: BenchConfig) -> Iterator[list[System]]:
    """oblivio, and the library to compare with, each on a fresh database of its own.

    On Citus: oblivio on a cluster started for the run, then oblivio on the
    PostgreSQL server (the ratios' baseline), so both run the same workloads.
    """
    labels = ["oblivio", *([config.compare] if config.compare else [])]
    with tempfile.TemporaryDirectory(prefix="oblivio-bench-") as tmp, ExitStack() as stack:
        directory = Path(tmp)
        urls: dict[str, str] = {}
        if config.backend == CITUS:
            yield _citus_and_server(config, directory, stack)
            return
        if config.backend == "postgres":
            urls = stack.enter_context(postgres_databases(config.server_url, labels))
        systems: list[System] = [OblivioSystem.create(directory / "oblivio", urls.get("oblivio"))]
        if config.compare:
            systems.append(_eventsourcing_system(directory, urls.get("eventsourcing")))
        yield systems


def _citus_and_server(config: BenchConfig, directory: Path, stack: ExitStack) -> list[System]:
    cluster_url = stack.enter_context(citus_databases(["oblivio"]))["oblivio"]
    server_url = stack.enter_context(postgres_databases(config.server_url, ["oblivio"]))["oblivio"]
    return [
        OblivioSystem.create(
            directory / "citus", cluster_url, CITUS, "coordinator + 2 workers on this machine"
        ),
        OblivioSystem.create(directory / "postgres", server_url, "postgres", "one server"),
    ]


def _eventsourcing_system(directory: Path, database_url: str | None) -> System:
    try:
        from oblivio_bench.eventsourcing_system import EventsourcingSystem
    except ImportError as e:
        raise BenchError(
            "--compare eventsourcing needs the library: pip install 'oblivio[bench]'"
        ) from e
    if database_url is None:
        return EventsourcingSystem.sqlite(directory / "eventsourcing.sqlite3")
    return EventsourcingSystem.postgres(database_url)


def run_workloads(
    workloads: Sequence[Workload],
    systems: Sequence[System],
    rounds: int,
    progress: Progress,
    gc_in_rounds: bool = True,
) -> list[WorkloadResult]:
    """Seed every system, then time each workload, systems interleaved round by round."""
    with open_sessions(systems) as sessions:
        for system in systems:
            progress(f"seeding {system.name} for the read workloads (not timed)")
            for workload in workloads:
                workload.seed(sessions[system.name])
        return [measure(w, systems, sessions, rounds, progress, gc_in_rounds) for w in workloads]


def measure(
    workload: Workload,
    systems: Sequence[System],
    sessions: dict[str, Session],
    rounds: int,
    progress: Progress,
    gc_in_rounds: bool = True,
) -> WorkloadResult:
    result = WorkloadResult(workload)
    total = workload.rounds(rounds)
    for round_no in range(1, total + 1):
        # A B A B …: drift on a shared machine (other jobs, checkpoints,
        # autovacuum, thermal limits) then hits every system alike.
        for system in systems:
            with garbage_collection(gc_in_rounds):
                m = workload.measure(system, sessions[system.name], round_no)
            result.add(system.name, m)
            progress(
                f"{workload.name:<16} round {round_no}/{total}  {system.name:<13} "
                f"{m.events_per_s:>10,.0f} events/s {m.ms_per_op:>9.3f} ms/op"
            )
    return result


@contextmanager
def garbage_collection(enabled: bool) -> Iterator[None]:
    """Leave the cyclic collector as it is, or pause it for the block and collect after.

    Reads that allocate more objects per event trigger more collections, and
    a full collection's cost grows with everything else the process holds,
    so with the collector running a ratio mixes CPU work with allocation
    pressure.  Paused, only the first is measured.  Only this process: writer
    processes keep their collector.
    """
    if enabled or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


@contextmanager
def open_sessions(systems: Sequence[System]) -> Iterator[dict[str, Session]]:
    sessions: dict[str, Session] = {}
    try:
        for system in systems:
            sessions[system.name] = system.open()
        yield sessions
    finally:
        for session in sessions.values():
            session.close()


#: The parameters of the log's append for a batch of events with no derived rows
#: (``eventstore.backends.postgres._append_sql(False, ())``), in placeholder order.
APPEND_PARAMETERS = (
    "new_version",
    "chain_hash",
    "stream_id",
    "old_version",
    "past_restriction",
    "recorded_at",
    "event_ids",
    "versions",
    "types",
    "schema_versions",
    "payloads",
    "digests",
    "chain_hashes",
)


def append_parameters(params: Mapping[str, Any]) -> list[Any]:
    """The append's named ``params`` (see :data:`APPEND_PARAMETERS`) as the statement
    takes them, by position."""
    return [params[name] for name in APPEND_PARAMETERS]
