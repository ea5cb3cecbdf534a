"""``oblivio bench memory``: store() beside a bare append, vector catch-up, retrieval, ingest.

1. **store() throughput.**  Each round stores fresh memories through the
   facade (``MemoryClient.store``: one transaction with the inline node
   graph), then appends the same events with ``EventStore.append`` to other
   subjects; the ratio pairs the two halves of each round.
2. **Vector catch-up.**  Each round leaves memories of many subjects pending
   for the vector projection (loaded through the batched command path, not
   timed), then times ``ProjectionRunner.run_pending`` applying them.
3. **Retrieval latency.**  One subject grows to 1,000, 10,000 and 100,000
   nodes (the default embedder, ``DEFAULT_EMBEDDER``); at each size ``retrieve`` is
   timed query by query, with the default consistent read: first warm, then
   interleaved (store one memory, retrieve once), as an agent that stores each
   message and retrieves for its answer does.

4. **Ingest.**  ``ingest()`` and the claim extraction worker beside
   ``store()`` (see :mod:`oblivio_bench.ingest`), on a store of its own.
5. **Re-embedding.**  A whole-store re-embedding job's nodes per second
   (see :mod:`oblivio_bench.reembed`), on a store of its own.
6. **Time.**  ``retrieve`` with ``as_of`` and with filters at 10,000 nodes, warm
   and right after a store (see :mod:`oblivio_bench.time_filters`), on a store
   of its own.

Sections 1 and 2 use the default embedder on one scratch store; section 3
uses a store of its own, so no vector of one dimension meets a query of
another.
"""

from __future__ import annotations

import random
import statistics
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from oblivio.client import MemoryClient
from oblivio.memory.queries import wait_for_vectors
from oblivio.settings import Settings
from oblivio_bench.cold import COLD_SIZES, ColdResult, cold_section, measure_cold
from oblivio_bench.config import CITUS, WITH_CITUS, RunConfig
from oblivio_bench.figures import Figure, FigureReport, Section, at_least, at_most, percentile
from oblivio_bench.ingest import INGEST_EVENTS, INGEST_SUBJECTS, ingest_section, measure_ingest
from oblivio_bench.loading import (
    check_applied,
    check_equivalent,
    load_subject,
    memory_texts,
    open_client,
    query_text,
    scratch_settings,
    stored_event,
    wait_until_visible,
)
from oblivio_bench.reembed import (
    REEMBED_FROM,
    REEMBED_NODES,
    REEMBED_SUBJECTS,
    ReembedRound,
    measure_reembed,
    reembed_section,
)
from oblivio_bench.report import load_average, machine_info, paired_ratio
from oblivio_bench.scratch import postgres_version
from oblivio_bench.systems import BenchError
from oblivio_bench.time_filters import (
    TIME_NODES,
    TIME_QUERIES,
    TimeResult,
    measure_time,
    time_section,
)
from oblivio_bench.workloads import Measurement, timed
from projections.embedders import DEFAULT_EMBEDDER, resolve_embedder

Progress = Callable[[str], None]

# Sizes at --scale 1.
STORE_EVENTS, STORE_SUBJECTS = 1_000, 50
CATCH_UP_EVENTS, CATCH_UP_SUBJECTS = 5_000, 50
#: (name, nodes, queries): the subject's size and how many queries are timed there.
RETRIEVAL_TIERS = (("1k", 1_000, 200), ("10k", 10_000, 100), ("100k", 100_000, 20))
RETRIEVAL_LIMIT = 10
RETRIEVAL_SUBJECT = "retrieval-subject"
LEAST_QUERIES = 5
SEED = 1729

#: The measurements, in the order they run; ``--section`` picks some of them.
SECTIONS = ("store", "catch-up", "retrieval", "ingest", "reembed", "time", "cold")

TARGET_STORE_RATIO = 0.5
TARGET_CATCH_UP_EVENTS_PER_S = 5_000.0  # on PostgreSQL
TARGET_P99_MS = {"10k": 20.0, "100k": 150.0}
#: A single-subject operation on Citus costs at most this many times one server's.
TARGET_CLUSTER_COST = 1.5


@dataclass(frozen=True)
class MemoryBenchConfig(RunConfig):
    """What to run: backend, rounds of the store and catch-up figures, size, sections."""

    backends = WITH_CITUS
    sections: tuple[str, ...] = SECTIONS

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.sections or not set(self.sections) <= set(SECTIONS):
            raise BenchError(f"sections must be some of {', '.join(SECTIONS)}")


@dataclass(frozen=True)
class RetrievalTier:
    #: Size at --scale 1, which names the tier's figures ("10k").
    name: str
    nodes: int
    queries: int
    nominal_nodes: int


@dataclass(frozen=True)
class MemorySizes:
    store_events: int
    store_subjects: int
    catch_up_events: int
    catch_up_subjects: int
    tiers: tuple[RetrievalTier, ...]
    ingest_events: int
    ingest_subjects: int
    reembed_nodes: int
    reembed_subjects: int
    time_nodes: int
    time_queries: int
    cold_sizes: tuple[int, ...] = COLD_SIZES

    @classmethod
    def scaled(cls, scale: float) -> MemorySizes:
        """Counts times ``scale``; query counts shrink with it but never grow."""

        def n(count: int, least: int = 1) -> int:
            return max(least, round(count * scale))

        tiers = tuple(
            RetrievalTier(name, n(nodes), max(LEAST_QUERIES, round(q * min(scale, 1))), nodes)
            for name, nodes, q in RETRIEVAL_TIERS
        )
        return cls(
            n(STORE_EVENTS),
            n(STORE_SUBJECTS),
            n(CATCH_UP_EVENTS),
            n(CATCH_UP_SUBJECTS),
            tiers,
            n(INGEST_EVENTS),
            n(INGEST_SUBJECTS),
            n(REEMBED_NODES),
            n(REEMBED_SUBJECTS),
            n(TIME_NODES),
            max(LEAST_QUERIES, round(TIME_QUERIES * min(scale, 1))),
            tuple(n(size) for size in COLD_SIZES),
        )


@dataclass(frozen=True)
class TierResult:
    """One retrieval tier: how its nodes were loaded and every query's latency."""

    tier: RetrievalTier
    added: int
    load_seconds: float
    catch_up_seconds: float
    #: The untimed warm-up query: it loads the subject into the retrieval index.
    first_query_ms: float
    latencies_ms: Sequence[float]
    #: The interleaved workload: each ``retrieve`` right after a ``store`` of one memory.
    after_store_ms: Sequence[float] = ()

    def latency_ms(self, q: float, *, after_store: bool = False) -> float:
        """The ``q``-th percentile latency of the queries, or of those right after a store."""
        return percentile(self.after_store_ms if after_store else self.latencies_ms, q)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.tier.nodes,
            "queries": len(self.latencies_ms),
            "nodes_added": self.added,
            "load_seconds": self.load_seconds,
            "catch_up_seconds": self.catch_up_seconds,
            "first_query_ms": self.first_query_ms,
            "p50_ms": self.latency_ms(50),
            "p99_ms": self.latency_ms(99),
            "mean_ms": statistics.fmean(self.latencies_ms),
            "latencies_ms": list(self.latencies_ms),
            "after_store_p50_ms": self.latency_ms(50, after_store=True),
            "after_store_p99_ms": self.latency_ms(99, after_store=True),
            "after_store_ms": list(self.after_store_ms),
        }


# -- the run ------------------------------------------------------------------------------


def run_memory_bench(
    config: MemoryBenchConfig, progress: Progress = lambda _: None
) -> FigureReport:
    """Run the chosen measurements on scratch stores and return the figures.

    On Citus each measurement runs on the cluster's store and then on a store of
    the PostgreSQL server, section by section, and a last section gives the
    cluster's cost over the server's.
    """
    sizes = MemorySizes.scaled(config.scale)
    wanted = [name for name in SECTIONS if name in config.sections]
    labels = ["store", "retrieval", *sorted(set(wanted) & {"ingest", "reembed", "time", "cold"})]
    measured = Measured()
    single = Measured()
    with ExitStack() as stack:
        settings = stack.enter_context(scratch_settings(config.backend, config.server_url, labels))
        places = [(measured, settings, progress)]
        if config.backend == CITUS:
            server = stack.enter_context(scratch_settings("postgres", config.server_url, labels))
            places.append((single, server, lambda line: progress(f"postgres: {line}")))
        version = postgres_version(config.server_url) if config.backend != "sqlite" else None
        machine = machine_info(version)
        for section in _measured_together(wanted):
            for into, where, told in places:
                measure_section(into, where, section, sizes, config.rounds, told)
        machine["load_average_end"] = load_average()
    sections = measured.sections(wanted, config.backend)
    details = measured.details()
    if config.backend == CITUS:
        sections = [
            *(_retitled(s, "Citus: ") for s in sections),
            *(
                _retitled(s, "one PostgreSQL server: ", "server_")
                for s in single.sections(wanted, "postgres")
            ),
            cluster_section(measured, single),
        ]
        details = details | {"server": single.details()}
    return FigureReport.of_run(
        "oblivio bench memory",
        config,
        machine,
        parameters=_parameters(sizes),
        sections=sections,
        details=details,
    )


@dataclass
class Measured:
    """What the sections measured on one store."""

    stores: list[Measurement] = field(default_factory=list)
    appends: list[Measurement] = field(default_factory=list)
    catch_ups: list[Measurement] = field(default_factory=list)
    tiers: list[TierResult] = field(default_factory=list)
    ingested: tuple[list[Measurement], list[Measurement], list[Measurement]] = ([], [], [])
    reembedded: list[ReembedRound] = field(default_factory=list)
    timed_filters: list[TimeResult] = field(default_factory=list)
    cold: list[ColdResult] = field(default_factory=list)

    def sections(self, wanted: Sequence[str], backend: str) -> list[Section]:
        built = {
            "store": lambda: store_section(self.stores, self.appends),
            "catch-up": lambda: catch_up_section(self.catch_ups, backend),
            "retrieval": lambda: retrieval_section(self.tiers),
            "ingest": lambda: ingest_section(*self.ingested),
            "reembed": lambda: reembed_section(self.reembedded),
            "time": lambda: time_section(self.timed_filters),
            "cold": lambda: cold_section(self.cold, backend),
        }
        return [built[name]() for name in wanted]

    def details(self) -> dict[str, Any]:
        return {
            "store": [m.to_json() for m in self.stores],
            "append": [m.to_json() for m in self.appends],
            "catch_up": [m.to_json() for m in self.catch_ups],
            "retrieval": {t.tier.name: t.to_json() for t in self.tiers},
            "ingest": {
                name: [m.to_json() for m in ms]
                for name, ms in zip(("store", "ingest", "extraction"), self.ingested, strict=True)
            },
            "reembed": [r.to_json() for r in self.reembedded],
            "time": [t.to_json() for t in self.timed_filters],
            "cold": [c.to_json() for c in self.cold],
        }


def _measured_together(wanted: Sequence[str]) -> list[tuple[str, ...]]:
    """The sections in the order they run; store and catch-up share one client."""
    shared = tuple(name for name in wanted if name in ("store", "catch-up"))
    return ([shared] if shared else []) + [(name,) for name in wanted if name not in shared]


def measure_section(
    into: Measured,
    settings: dict[str, Settings],
    names: tuple[str, ...],
    sizes: MemorySizes,
    rounds: int,
    progress: Progress,
) -> None:
    """Run the sections ``names`` on the scratch stores ``settings``, into ``into``."""
    if "store" in names or "catch-up" in names:
        with open_client(settings["store"]) as client:
            if "store" in names:
                into.stores, into.appends = measure_store(client, sizes, rounds, progress)
            if "catch-up" in names:
                into.catch_ups = measure_catch_up(client, sizes, rounds, progress)
    elif names == ("retrieval",):
        with open_client(settings["retrieval"], resolve_embedder(DEFAULT_EMBEDDER)) as client:
            into.tiers = measure_retrieval(client, sizes, progress)
    elif names == ("ingest",):
        with open_client(settings["ingest"]) as client:
            into.ingested = measure_ingest(
                client, sizes.ingest_events, sizes.ingest_subjects, rounds, progress
            )
    elif names == ("reembed",):
        first = settings["reembed"].model_copy(update={"embedder": REEMBED_FROM})
        with open_client(first) as client:
            into.reembedded = measure_reembed(
                client, sizes.reembed_nodes, sizes.reembed_subjects, rounds, progress
            )
    elif names == ("time",):
        with open_client(settings["time"], resolve_embedder(DEFAULT_EMBEDDER)) as client:
            into.timed_filters = [
                measure_time(client, sizes.time_nodes, sizes.time_queries, TIME_NODES, progress)
            ]
    elif names == ("cold",):
        with open_client(settings["cold"]) as client:
            into.cold = measure_cold(client, settings["cold"], sizes.cold_sizes, rounds, progress)


def _parameters(sizes: MemorySizes) -> dict[str, Any]:
    return {
        "store_events_per_round": sizes.store_events,
        "store_subjects": sizes.store_subjects,
        "catch_up_events_per_round": sizes.catch_up_events,
        "catch_up_subjects": sizes.catch_up_subjects,
        "retrieval_embedder": DEFAULT_EMBEDDER,
        "retrieval_limit": RETRIEVAL_LIMIT,
        "retrieval_tiers": {t.name: {"nodes": t.nodes, "queries": t.queries} for t in sizes.tiers},
        "ingest_messages_per_round": sizes.ingest_events,
        "ingest_subjects": sizes.ingest_subjects,
        "reembed_nodes": sizes.reembed_nodes,
        "reembed_subjects": sizes.reembed_subjects,
        "time_nodes": sizes.time_nodes,
        "time_queries": sizes.time_queries,
    }


# -- Citus beside one server --------------------------------------------------------------


def _retitled(section: Section, prefix: str, key_prefix: str = "") -> Section:
    figures = [replace(f, key=key_prefix + f.key) for f in section.figures]
    return Section(prefix + section.title, figures, section.notes)


def cluster_section(cluster: Measured, server: Measured) -> Section:
    """The cluster's cost over the server's, per figure measured on both: time per
    operation on the cluster divided by the same on the server (above 1: slower)."""

    def cost(key: str, title: str, value: float, single_subject: bool = True) -> Figure:
        bound = at_most(TARGET_CLUSTER_COST) if single_subject else None
        return Figure(f"citus_cost_{key}", title, value, "×", bound)

    figures = []
    if cluster.stores:
        figures += [
            cost(
                "store",
                "store(), one subject a call",
                _median(server.stores) / _median(cluster.stores),
            ),
            cost(
                "append",
                "EventStore.append, one subject a call",
                _median(server.appends) / _median(cluster.appends),
            ),
        ]
    if cluster.catch_ups:
        figures.append(
            cost(
                "catch_up",
                "vector catch-up, many subjects",
                _median(server.catch_ups) / _median(cluster.catch_ups),
                single_subject=False,
            )
        )
    for ours, theirs in zip(cluster.tiers, server.tiers, strict=True):
        name = ours.tier.name
        figures += [
            cost(
                f"retrieve_{name}_p50",
                f"retrieve p50, {ours.tier.nodes:,} nodes",
                ours.latency_ms(50) / theirs.latency_ms(50),
            ),
            cost(
                f"retrieve_{name}_after_store_p50",
                "  p50 right after a store",
                ours.latency_ms(50, after_store=True) / theirs.latency_ms(50, after_store=True),
            ),
        ]
    return Section(
        "Citus (coordinator + 2 workers) over one PostgreSQL server, same run",
        figures,
        [
            "each figure: time per operation on the cluster over the same on the server "
            "(ratios of medians; the two stores run each section one after the other)",
            f"target (issue 31): a single-subject operation costs at most "
            f"{TARGET_CLUSTER_COST}x the single server",
        ],
    )


# -- 1. store() against a bare append -----------------------------------------------------


def measure_store(
    client: MemoryClient, sizes: MemorySizes, rounds: int, progress: Progress
) -> tuple[list[Measurement], list[Measurement]]:
    """Rounds of ``store()`` then bare appends of the same events, to other subjects."""
    rng = random.Random(SEED)
    stores: list[Measurement] = []
    appends: list[Measurement] = []
    for round_no in range(1, rounds + 1):
        texts = memory_texts(rng, sizes.store_events)
        store_plan = _plan(f"store-{round_no}", sizes.store_subjects, texts)
        stored, first_id = time_stores(client, store_plan)
        if round_no == 1:
            _check_store_event(client, first_id, store_plan[0][0])
        appended = time_appends(client, _plan(f"append-{round_no}", sizes.store_subjects, texts))
        stores.append(stored)
        appends.append(appended)
        progress(
            f"store     round {round_no}/{rounds}  store() {stored.events_per_s:8,.0f} events/s"
            f"  append {appended.events_per_s:8,.0f} events/s"
        )
    return stores, appends


def _plan(prefix: str, subjects: int, texts: Sequence[str]) -> list[tuple[str, str]]:
    """(user, text) pairs, round-robin over ``subjects`` users."""
    return [(f"{prefix}-{i % subjects}", text) for i, text in enumerate(texts)]


def time_stores(
    client: MemoryClient, plan: Sequence[tuple[str, str]]
) -> tuple[Measurement, uuid.UUID]:
    """``store()`` each planned memory in its own call; the first event's id."""
    seconds, ids = timed(lambda: [client.store(text, user_id=user) for user, text in plan])
    return Measurement(len(plan), len(plan), seconds, seconds), ids[0]


def time_appends(client: MemoryClient, plan: Sequence[tuple[str, str]]) -> Measurement:
    """``EventStore.append`` of the event ``store()`` would record, one per transaction.

    The events are built before the clock starts, so this times the log alone.
    """
    log, namespace = client.context.store, client.context.namespace
    events = [(user, stored_event(user, text)) for user, text in plan]
    seconds, _ = timed(lambda: [log.append(namespace, user, [event]) for user, event in events])
    return Measurement(len(plan), len(plan), seconds, seconds)


def _check_store_event(client: MemoryClient, event_id: uuid.UUID, user: str) -> None:
    [recorded] = client.context.store.get_events([event_id])
    check_equivalent(recorded, user)


def store_section(stores: Sequence[Measurement], appends: Sequence[Measurement]) -> Section:
    ratio = paired_ratio(stores, appends)
    return Section(
        "store() against a bare log append",
        [
            Figure("store_events_per_s", "store() events/s", _median(stores), "events/s"),
            Figure(
                "append_events_per_s", "EventStore.append events/s", _median(appends), "events/s"
            ),
            Figure(
                "store_append_ratio",
                "store() / append ratio",
                ratio,
                "×",
                at_least(TARGET_STORE_RATIO),
            ),
        ],
        [
            "one event per call and transaction; ratio: median over rounds of the two "
            "halves of each round",
        ],
    )


def _median(measurements: Sequence[Measurement]) -> float:
    return statistics.median(m.events_per_s for m in measurements)


# -- 2. vector projection catch-up --------------------------------------------------------


def measure_catch_up(
    client: MemoryClient, sizes: MemorySizes, rounds: int, progress: Progress
) -> list[Measurement]:
    """Rounds of: leave memories pending (not timed), time the runner applying them."""
    runner = client.context.runner
    _apply_store_rounds(client, sizes, rounds)
    rng = random.Random(SEED + 1)
    results = []
    for round_no in range(1, rounds + 1):
        _leave_pending(client, sizes, f"catch-up-{round_no}", rng)
        wait_until_visible(client.context, sizes.catch_up_events)
        seconds, applied = timed(runner.run_pending)
        check_applied(applied, sizes.catch_up_events)
        results.append(Measurement(applied, applied, seconds, seconds))
        progress(
            f"catch-up  round {round_no}/{rounds}  {applied:,} events "
            f"{applied / seconds:8,.0f} events/s"
        )
    return results


def _apply_store_rounds(client: MemoryClient, sizes: MemorySizes, rounds: int) -> None:
    """Apply, untimed, what the store rounds left pending.

    Their transactions ran one after another, so once the last append can be
    delivered (on PostgreSQL, a transaction open in the database holds the log's
    horizon back) every earlier one can too; otherwise a late one would be
    counted in the first timed round.
    """
    last_subject = _plan(f"append-{rounds}", sizes.store_subjects, [""] * sizes.store_events)
    wait_for_vectors(client.context, last_subject[-1][0])
    client.context.runner.run_pending()


def _leave_pending(
    client: MemoryClient, sizes: MemorySizes, prefix: str, rng: random.Random
) -> None:
    per_subject, extra = divmod(sizes.catch_up_events, sizes.catch_up_subjects)
    for i in range(sizes.catch_up_subjects):
        count = per_subject + (1 if i < extra else 0)
        if count:
            load_subject(client.context, f"{prefix}-{i}", count, rng)


def catch_up_section(catch_ups: Sequence[Measurement], backend: str) -> Section:
    return Section(
        "vector projection catch-up",
        [
            Figure(
                "catch_up_events_per_s",
                "ProjectionRunner.run_pending events/s",
                _median(catch_ups),
                "events/s",
                at_least(TARGET_CATCH_UP_EVENTS_PER_S),
                applies=backend == "postgres",
            )
        ],
        [f"default embedder ({DEFAULT_EMBEDDER}); the target is for PostgreSQL"],
    )


# -- 3. retrieval latency -----------------------------------------------------------------


def measure_retrieval(
    client: MemoryClient, sizes: MemorySizes, progress: Progress
) -> list[TierResult]:
    """Grow one subject tier by tier and time ``retrieve`` at each size."""
    rng = random.Random(SEED + 2)
    results: list[TierResult] = []
    loaded = 0
    for tier in sizes.tiers:
        result = _grow_and_query(client, tier, tier.nodes - loaded, rng, progress)
        results.append(result)
        loaded = tier.nodes
    return results


def _grow_and_query(
    client: MemoryClient, tier: RetrievalTier, added: int, rng: random.Random, progress: Progress
) -> TierResult:
    progress(f"retrieval {tier.name}: storing {added:,} more memories (batched)")
    load_seconds, _ = timed(lambda: load_subject(client.context, RETRIEVAL_SUBJECT, added, rng))
    wait_until_visible(client.context, added)
    catch_up_seconds, applied = timed(client.context.runner.run_pending)
    check_applied(applied, added)
    progress(
        f"retrieval {tier.name}: loaded in {load_seconds:,.1f} s, vectors in "
        f"{catch_up_seconds:,.1f} s; timing {tier.queries} queries"
    )
    first_ms, latencies = time_queries(client, tier, rng)
    after_store = time_interleaved(client, tier, rng)
    # The reads applied their stores' events themselves (the vector state's marks); the
    # runner's checkpoints pass them now, untimed, so the next tier counts its own.
    client.context.runner.run_pending()
    result = TierResult(
        tier, added, load_seconds, catch_up_seconds, first_ms, latencies, after_store
    )
    p50, p99 = (result.latency_ms(q) for q in (50, 99))
    after_p50, after_p99 = (result.latency_ms(q, after_store=True) for q in (50, 99))
    progress(
        f"retrieval {tier.name}: {tier.nodes:,} nodes  p50 {p50:,.1f} ms  p99 {p99:,.1f} ms; "
        f"right after a store p50 {after_p50:,.1f} ms  p99 {after_p99:,.1f} ms"
    )
    return result


def time_interleaved(client: MemoryClient, tier: RetrievalTier, rng: random.Random) -> list[float]:
    """Store one memory, then time one ``retrieve``, ``tier.queries`` times: an agent
    that stores each message and retrieves for its answer.  The store is not
    timed; the retrieve includes waiting for that memory's vector."""
    latencies = []
    for text in memory_texts(rng, tier.queries):
        client.store(text, user_id=RETRIEVAL_SUBJECT)
        latencies.append(_retrieve(client, query_text(rng), tier) * 1000)
    return latencies


def time_queries(
    client: MemoryClient, tier: RetrievalTier, rng: random.Random
) -> tuple[float, list[float]]:
    """Milliseconds of the warm-up query (which fills the retrieval index after the
    subject grew), then of each timed ``retrieve``."""
    queries = [query_text(rng) for _ in range(tier.queries + 1)]
    first = _retrieve(client, queries[0], tier) * 1000
    return first, [_retrieve(client, query, tier) * 1000 for query in queries[1:]]


def _retrieve(client: MemoryClient, query: str, tier: RetrievalTier) -> float:
    """Seconds one ``retrieve`` took; fails unless it found a full page."""
    seconds, found = timed(
        lambda: client.retrieve(query, user_id=RETRIEVAL_SUBJECT, limit=RETRIEVAL_LIMIT)
    )
    # At least the tier's nodes: the interleaved workload stores more as it goes.
    if len(found.results) < min(RETRIEVAL_LIMIT, tier.nodes):
        raise BenchError(f"retrieve returned {len(found.results)} nodes at {tier.nodes:,} nodes")
    return seconds


def retrieval_section(tiers: Sequence[TierResult]) -> Section:
    return Section(
        f"retrieve(limit={RETRIEVAL_LIMIT}) on one subject",
        [figure for t in tiers for figure in _tier_figures(t)],
        [
            f"embedder {DEFAULT_EMBEDDER}; consistent reads (the default); "
            "p99 is nearest-rank, so below 100 queries it is the slowest query",
        ],
    )


def _tier_figures(t: TierResult) -> list[Figure]:
    name, nodes = t.tier.name, f"{t.tier.nodes:,} nodes"
    target = TARGET_P99_MS.get(name)

    def p99(key: str, title: str, value: float) -> Figure:
        # The target is judged only at the tier's full size (not at a smaller --scale).
        bound = None if target is None else at_most(target)
        return Figure(key, title, value, "ms", bound, applies=t.tier.nodes >= t.tier.nominal_nodes)

    return [
        Figure(f"retrieve_{name}_p50_ms", f"retrieve p50, {nodes}", t.latency_ms(50), "ms"),
        p99(
            f"retrieve_{name}_p99_ms",
            f"retrieve p99, {nodes} ({len(t.latencies_ms)} queries)",
            t.latency_ms(99),
        ),
        p99(
            f"retrieve_{name}_after_store_p99_ms",
            f"retrieve p99 right after a store, {nodes} ({len(t.after_store_ms)} rounds)",
            t.latency_ms(99, after_store=True),
        ),
        Figure(
            f"retrieve_{name}_first_ms",
            "  first query after growth (loads the index)",
            t.first_query_ms,
            "ms",
        ),
        Figure(
            f"retrieval_{name}_load_s",
            f"  loading {t.added:,} nodes (log + graph, batched)",
            t.load_seconds,
            "s",
        ),
        Figure(
            f"retrieval_{name}_catch_up_events_per_s",
            "  their vectors (one subject's catch-up)",
            t.added / t.catch_up_seconds,
            "events/s",
        ),
    ]
