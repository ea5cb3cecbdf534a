"""``oblivio bench memory --section ingest``: ingest() and claim extraction beside store().

Each round, in one store and on fresh subjects:

1. ``store()`` of N first-person messages, one call each (the baseline);
2. ``ingest()`` of N such messages with ``first_person_owner=True``, one call
   each, without waiting for extraction;
3. the extraction worker catching up on them (``ExtractionWorker.run_pending``):
   one claims event per message, with its claims and any retirements.

Both ratios pair the halves of one round, and the median over rounds is
reported; the targets are 0.5 for both.  The messages come from the rule
extractor's own forms (uses, has, likes, lives in, switched from … to, their
negations), so many of them retire earlier claims of their subject.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence

from oblivio.client import MemoryClient
from oblivio_bench.figures import Figure, Section, at_least
from oblivio_bench.loading import VOCABULARY
from oblivio_bench.report import paired_ratio
from oblivio_bench.systems import BenchError
from oblivio_bench.workloads import Measurement, timed
from projections import events as ev

Progress = Callable[[str], None]

INGEST_EVENTS, INGEST_SUBJECTS = 1_000, 50
TARGET_INGEST_RATIO = 0.5
TARGET_EXTRACTION_RATIO = 0.5
VISIBILITY_TIMEOUT_SECONDS = 60.0
SEED = 2718
TEMPLATES = (
    "I use {a}.",
    "I don't use {a} anymore.",
    "I have {a} and I like {b}.",
    "I switched from {a} to {b}.",
    "I live in {a}.",
    "I no longer live in {a}.",
    "My favourite word is {a}.",
)
#: Few objects per subject, so that corrections find what they correct.
OBJECTS = VOCABULARY[:40]


def message_texts(rng: random.Random, count: int) -> list[str]:
    return [
        rng.choice(TEMPLATES).format(a=rng.choice(OBJECTS), b=rng.choice(OBJECTS))
        for _ in range(count)
    ]


def measure_ingest(
    client: MemoryClient, events: int, subjects: int, rounds: int, progress: Progress
) -> tuple[list[Measurement], list[Measurement], list[Measurement]]:
    """Rounds of store(), ingest() and extraction catch-up (see the module docstring)."""
    rng = random.Random(SEED)
    stores: list[Measurement] = []
    ingests: list[Measurement] = []
    extractions: list[Measurement] = []
    for round_no in range(1, rounds + 1):
        texts = message_texts(rng, events)
        # The claims events of the last round's final pages are still pending.
        already = _pending(client)
        stored = _time_calls(
            _plan(f"ingest-store-{round_no}", subjects, texts),
            lambda user, text: client.store(text, user_id=user),
        )
        ingested = _time_calls(
            plan := _plan(f"ingest-{round_no}", subjects, texts),
            lambda user, text: client.ingest(text, user_id=user, first_person_owner=True),
        )
        extracted = _time_extraction(client, plan, events, already)
        stores.append(stored)
        ingests.append(ingested)
        extractions.append(extracted)
        progress(
            f"ingest    round {round_no}/{rounds}  store() {stored.events_per_s:8,.0f}/s"
            f"  ingest() {ingested.events_per_s:8,.0f}/s"
            f"  extraction {extracted.events_per_s:8,.0f} messages/s"
        )
    return stores, ingests, extractions


def _plan(prefix: str, subjects: int, texts: Sequence[str]) -> list[tuple[str, str]]:
    return [(f"{prefix}-{i % subjects}", text) for i, text in enumerate(texts)]


def _time_calls(plan: Sequence[tuple[str, str]], call: Callable[[str, str], object]) -> Measurement:
    seconds, _ = timed(lambda: [call(user, text) for user, text in plan])
    return Measurement(len(plan), len(plan), seconds, seconds)


def _time_extraction(
    client: MemoryClient, plan: Sequence[tuple[str, str]], messages: int, already: int
) -> Measurement:
    """Time the worker extracting the round's messages; check each got its plan."""
    ctx = client.context
    _wait_until_visible(client, already + 2 * messages)  # the store and the ingest half
    seconds, _ = timed(ctx.extraction.run_pending)
    users = {user for user, _ in plan}
    plans = sum(
        1
        for user in users
        for e in ctx.store.read_stream(ctx.namespace, user)
        if e.type == ev.CLAIMS_EXTRACTED
    )
    if plans != messages:
        raise BenchError(f"extraction appended {plans} plans for {messages} messages")
    return Measurement(messages, messages, seconds, seconds)


def _wait_until_visible(client: MemoryClient, expected: int) -> None:
    """Wait (untimed) until the worker can see ``expected`` events (see
    ``oblivio.bench.loading.wait_until_visible`` for why a server needs this)."""
    deadline = time.monotonic() + VISIBILITY_TIMEOUT_SECONDS
    while time.monotonic() < deadline and _pending(client) < expected:
        time.sleep(0.05)


def _pending(client: MemoryClient) -> int:
    """Events after the extraction worker's checkpoints that it can see now."""
    worker, store = client.context.extraction, client.context.store
    return sum(
        store.count_after(worker.checkpoint(p), partition=(p, worker.partitions))
        for p in range(worker.partitions)
    )


def ingest_section(
    stores: Sequence[Measurement],
    ingests: Sequence[Measurement],
    extractions: Sequence[Measurement],
) -> Section:
    def median(ms: Sequence[Measurement]) -> float:
        return sorted(m.events_per_s for m in ms)[len(ms) // 2]

    return Section(
        "ingest() and claim extraction against store()",
        [
            Figure("ingest_store_events_per_s", "store() messages/s", median(stores), "msg/s"),
            Figure("ingest_events_per_s", "ingest() messages/s", median(ingests), "msg/s"),
            Figure(
                "extraction_events_per_s",
                "extraction catch-up messages/s",
                median(extractions),
                "msg/s",
            ),
            Figure(
                "ingest_store_ratio",
                "ingest() / store() ratio",
                paired_ratio(ingests, stores),
                "×",
                at_least(TARGET_INGEST_RATIO),
            ),
            Figure(
                "extraction_store_ratio",
                "extraction catch-up / store() ratio",
                paired_ratio(extractions, stores),
                "×",
                at_least(TARGET_EXTRACTION_RATIO),
            ),
        ],
        [
            "default rule extractor; one message per call and transaction; ratios: median "
            "over rounds of the halves of each round",
        ],
    )
