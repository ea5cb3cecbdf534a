"""``oblivio bench memory --section time``: retrieve with ``as_of`` and with filters.

One subject of 10,000 nodes (at ``--scale 1``) whose memories took effect over
ten years (``occurred_at``) and carry two metadata keys, loaded through the
batched command path.  ``retrieve`` is timed with ``as_of`` (a random moment of
the ten years) and with filters (a one-year ``occurred_since``/``occurred_until``
window and one ``meta`` value, about one node in eighty), warm, then each right
after a ``store`` of one memory, as an agent stores a message and then asks.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from eventstore import NewEvent
from oblivio.client import MemoryClient
from oblivio.memory.records import Retrieval
from oblivio_bench.figures import Figure, Section, at_most, percentile
from oblivio_bench.loading import (
    LOAD_BATCH,
    append_events,
    check_applied,
    memory_text,
    query_text,
    stored_data,
    wait_until_visible,
)
from oblivio_bench.systems import BenchError
from oblivio_bench.workloads import timed
from projections import events as ev

Progress = Callable[[str], None]

TIME_NODES, TIME_QUERIES = 10_000, 100
TIME_SUBJECT = "time-subject"
TIME_LIMIT = 10
TARGET_P99_MS = 20.0
START = datetime(2016, 1, 1, tzinfo=UTC)
SPAN = timedelta(days=3650)
TOPICS = tuple(f"topic-{n}" for n in range(8))
SOURCES = ("chat", "email", "import")
SEED = 3030
#: The workloads: (name, right after a store).  "plain" is retrieve without either, on
#: the same subject and machine: the ratios to it are what the time filters cost.
WORKLOADS = tuple(
    (name, after) for after in (False, True) for name in ("plain", "as_of", "filters")
)


@dataclass(frozen=True)
class TimeResult:
    nodes: int
    nominal_nodes: int
    first_query_ms: float
    #: Milliseconds of each timed query, by (workload, after a store).
    latencies_ms: dict[tuple[str, bool], list[float]]

    def latency_ms(self, name: str, after_store: bool, q: float) -> float:
        return percentile(self.latencies_ms[(name, after_store)], q)

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "first_query_ms": self.first_query_ms,
            **{
                f"{name}{'_after_store' if after else ''}_ms": values
                for (name, after), values in self.latencies_ms.items()
            },
        }


def _moment(rng: random.Random) -> datetime:
    return START + SPAN * rng.random()


def _event(rng: random.Random) -> NewEvent:
    data = stored_data(TIME_SUBJECT, memory_text(rng))
    data["occurred_at"] = _moment(rng).isoformat()
    data["meta"] = {"topic": rng.choice(TOPICS), "source": rng.choice(SOURCES)}
    return NewEvent(ev.STORED, data)


def _filters(rng: random.Random, name: str) -> dict[str, Any]:
    if name == "plain":
        return {}
    if name == "as_of":
        return {"as_of": _moment(rng)}
    since = START + (SPAN - timedelta(days=365)) * rng.random()
    return {
        "occurred_since": since,
        "occurred_until": since + timedelta(days=365),
        "meta": {"topic": rng.choice(TOPICS)},
    }


def measure_time(
    client: MemoryClient, nodes: int, queries: int, nominal: int, progress: Progress
) -> TimeResult:
    """Load the subject, then time each workload ``queries`` times."""
    rng = random.Random(SEED)
    ctx = client.context
    progress(f"time      loading {nodes:,} memories with effective times and metadata")
    for start in range(0, nodes, LOAD_BATCH):
        append_events(
            ctx, TIME_SUBJECT, [_event(rng) for _ in range(min(LOAD_BATCH, nodes - start))]
        )
    wait_until_visible(ctx, nodes)
    check_applied(ctx.runner.run_pending(), nodes)
    first, _ = timed(lambda: _retrieve(client, query_text(rng), {"as_of": _moment(rng)}))
    latencies: dict[tuple[str, bool], list[float]] = {w: [] for w in WORKLOADS}
    # Interleaved (plain, as_of, filters, plain, …): a noisy machine's slow spells
    # fall on all three alike, so their ratios measure what the filters cost.
    for _ in range(queries):
        for name, after_store in WORKLOADS:
            latencies[(name, after_store)].append(_timed_query(client, rng, name, after_store))
    for name, after_store in WORKLOADS:
        p99 = percentile(latencies[(name, after_store)], 99)
        when = "right after a store" if after_store else "warm"
        progress(f"time      {name:8} {when:20} p99 {p99:,.1f} ms")
    return TimeResult(nodes, nominal, first * 1000, latencies)


def _timed_query(client: MemoryClient, rng: random.Random, name: str, after_store: bool) -> float:
    if after_store:  # not timed: the retrieve waits for its vector
        client.store(memory_text(rng), user_id=TIME_SUBJECT, occurred_at=_moment(rng))
    wanted = _filters(rng, name)
    seconds, found = timed(lambda: _retrieve(client, query_text(rng), wanted))
    _check(found, wanted)
    return seconds * 1000


def _retrieve(client: MemoryClient, query: str, wanted: dict[str, Any]) -> Retrieval:
    return client.retrieve(query, user_id=TIME_SUBJECT, limit=TIME_LIMIT, **wanted)


def _check(found: Retrieval, wanted: dict[str, Any]) -> None:
    """Fail unless every node returned passes the filters (after the timing)."""
    moment = wanted.get("as_of")
    for node in found.nodes:
        wrong = (
            (moment is not None and node.occurred_at > moment)
            or ("occurred_since" in wanted and node.occurred_at < wanted["occurred_since"])
            or ("occurred_until" in wanted and node.occurred_at >= wanted["occurred_until"])
            or ("meta" in wanted and node.meta.get("topic") != wanted["meta"]["topic"])
        )
        if wrong:
            raise BenchError(f"retrieve with {sorted(wanted)} returned a node it filters out")
    if not wanted and len(found.results) < TIME_LIMIT:
        raise BenchError(f"retrieve returned {len(found.results)} nodes")


def time_section(results: Sequence[TimeResult]) -> Section:
    figures: list[Figure] = []
    for result in results:
        nodes = f"{result.nodes:,} nodes"
        for name, after_store in WORKLOADS:
            key = f"retrieve_{name}{'_after_store' if after_store else ''}"
            when = " right after a store" if after_store else ""
            figures += [
                Figure(
                    f"{key}_p50_ms",
                    f"retrieve with {name} p50{when}, {nodes}",
                    result.latency_ms(name, after_store, 50),
                    "ms",
                ),
                Figure(
                    f"{key}_p99_ms",
                    f"retrieve with {name} p99{when}, {nodes}",
                    result.latency_ms(name, after_store, 99),
                    "ms",
                    None if name == "plain" else at_most(TARGET_P99_MS),
                    applies=result.nodes >= result.nominal_nodes,
                ),
            ]
            if name != "plain":
                figures += [
                    Figure(
                        f"{key}_p{q}_ratio",
                        f"  p{q} with {name} / without{when}",
                        result.latency_ms(name, after_store, q)
                        / result.latency_ms("plain", after_store, q),
                        "×",
                    )
                    for q in (50, 99)
                ]
        figures.append(
            Figure(
                "retrieve_time_first_ms",
                "  first query (loads the index)",
                result.first_query_ms,
                "ms",
            )
        )
    return Section(
        f"retrieve(limit={TIME_LIMIT}) with as_of and with filters",
        figures,
        [
            "as_of: a random moment of ten years of effective times; filters: a one-year "
            "occurred_since/occurred_until window and one meta value (about 1 node in 80); "
            "the target (20 ms) is judged at 10,000 nodes",
        ],
    )
