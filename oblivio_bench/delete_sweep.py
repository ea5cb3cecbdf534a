"""``oblivio bench erasure --sweep``: delete_event to its certificate as the person grows.

For each size, one subject of that many memories is loaded through the
batched command path (``oblivio_bench.loading``: log and node graph, 500
events per transaction, what ``store()`` writes; timed apart), a hundredth
of them corrected with ``supersede`` (at least five), a thousandth (at least
five) given likely-update pairs (an older memory and a newer one in words the
detector reads as a change, judged by the likely-update worker), and the
vector state caught up (timed apart).  Then the subject's snapshots are built
as a worker builds them in the background (``workers.snapshots``: the due
builds enqueued and run until none is pending; timed apart).  Then
``--rounds`` events drawn uniformly from the subject's history (memories,
corrections, likely-update pairs and their decisions alike) are each deleted
and certified: ``delete_event``, the rebuild jobs, ``verify_certificate``.
The figure is that time's median and maximum per size, the first delete
among them, and the ratio of the largest size's median to the smallest's.
"""

from __future__ import annotations

import random
import statistics
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from oblivio.client import MemoryClient
from oblivio_bench.config import RunConfig
from oblivio_bench.figures import Figure, FigureReport, Section, at_most
from oblivio_bench.loading import VOCABULARY, load_subject, open_client, scratch_settings
from oblivio_bench.report import load_average, machine_info
from oblivio_bench.scratch import postgres_version
from oblivio_bench.systems import BenchError
from oblivio_bench.workloads import timed
from projections import events as ev

Progress = Callable[[str], None]

SIZES = (1_000, 10_000, 50_000)
SEED = 3301
#: Largest size's median over the smallest's (issue 33).
TARGET_GROWTH = 2.0


@dataclass(frozen=True)
class SweepConfig(RunConfig):
    """Subject sizes (times ``scale``); ``rounds`` deletes timed per size."""

    sizes: Sequence[int] = SIZES

    def subject_sizes(self) -> list[int]:
        return [max(10, round(size * self.scale)) for size in self.sizes]


@dataclass(frozen=True)
class SizeResult:
    size: int
    load_seconds: float
    catch_up_seconds: float
    snapshot_seconds: float
    likely_updates: int
    #: Every timed delete in order, the subject's first certified delete first.
    delete_ms: Sequence[float]
    replayed: Sequence[str]
    #: What each deleted event was: memory, correction, likely-update pair, decision.
    deleted: Sequence[str]

    @property
    def first_ms(self) -> float:
        return self.delete_ms[0]

    def to_json(self) -> dict[str, Any]:
        return {
            "memories": self.size,
            "load_seconds": self.load_seconds,
            "catch_up_seconds": self.catch_up_seconds,
            "snapshot_build_seconds": self.snapshot_seconds,
            "likely_updates": self.likely_updates,
            "first_delete_ms": self.first_ms,
            "delete_ms": list(self.delete_ms),
            "replayed": list(self.replayed),
            "deleted": list(self.deleted),
        }


def run_delete_sweep(config: SweepConfig, progress: Progress = lambda _: None) -> FigureReport:
    with (
        scratch_settings(config.backend, config.server_url, ["sweep"]) as settings,
        open_client(settings["sweep"]) as client,
    ):
        server = postgres_version(config.server_url) if config.backend == "postgres" else None
        machine = machine_info(server)
        rng = random.Random(SEED)
        results = [run_size(client, config, size, rng, progress) for size in config.subject_sizes()]
        machine["load_average_end"] = load_average()
    first, last = results[0], results[-1]
    growth = statistics.median(last.delete_ms) / statistics.median(first.delete_ms)
    return FigureReport.of_run(
        "oblivio bench erasure --sweep",
        config,
        machine,
        parameters={"sizes": [r.size for r in results], "deletes_per_size": config.rounds},
        sections=[
            *(size_section(r) for r in results),
            Section(
                "growth",
                [
                    Figure(
                        "certified_delete_growth_ratio",
                        f"median at {last.size:,} / at {first.size:,} memories",
                        growth,
                        "×",
                        at_most(TARGET_GROWTH),
                    )
                ],
                [
                    "certified delete: delete_event, then the rebuild jobs "
                    "(RebuildWorker.run_pending), then verify_certificate",
                    "before the deletes, the subject's snapshots are built as the "
                    "background worker builds them (workers.snapshots), timed apart; "
                    "the subject's first certified delete is among the timed ones",
                ],
            ),
        ],
        details={str(r.size): r.to_json() for r in results},
    )


def run_size(
    client: MemoryClient, config: SweepConfig, size: int, rng: random.Random, progress: Progress
) -> SizeResult:
    user = f"sweep-{size}"
    progress(f"{size:,}: loading the subject (batched command path, timed apart)")
    load_seconds, recorded = timed(lambda: load_subject(client.context, user, size, rng))
    kinds = dict.fromkeys((e.event_id for e in recorded), "memory")
    kinds |= dict.fromkeys(correct(client, user, list(kinds), rng), "correction")
    pairs = likely_update_pairs(client, user, max(5, size // 1000), rng)
    catch_up_seconds, _ = timed(client.context.runner.run_pending)
    progress(f"{size:,}: loaded in {load_seconds:,.1f} s, vectors in {catch_up_seconds:,.1f} s")
    decisions = judge_likely_updates(client, user)
    client.context.runner.run_pending()  # past the decisions too: a build waits for it
    kinds |= dict.fromkeys(pairs, "likely-update pair") | dict.fromkeys(decisions, "decision")
    snapshot_seconds, _ = timed(lambda: build_snapshots(client, size))
    progress(f"{size:,}: snapshots built in the background's way in {snapshot_seconds:,.1f} s")
    delete_ms, replayed, deleted = [], [], []
    for event_id in rng.sample(list(kinds), config.rounds):
        ms, proofs = certified_delete(client, user, event_id)
        delete_ms.append(ms)
        replayed.append("/".join(sorted(set(proofs))))
        deleted.append(kinds[event_id])
        progress(f"{size:,}: certified delete of a {deleted[-1]} {ms:,.0f} ms ({replayed[-1]})")
    return SizeResult(
        size,
        load_seconds,
        catch_up_seconds,
        snapshot_seconds,
        len(decisions),
        delete_ms,
        replayed,
        deleted,
    )


def build_snapshots(client: MemoryClient, size: int) -> int:
    """Enqueue the subject's due snapshot builds and run them until none is pending
    (the condition waited on); how many ran.  The threshold is the store's, or the
    subject's size where that is smaller (a smoke run's subjects are small)."""
    builder = client.context.snapshots
    builder.policy = replace(builder.policy, every=min(builder.policy.every, size))
    builder.enqueue_due()
    ran = builder.run_pending()
    if builder.pending():
        raise BenchError("snapshot builds are still pending after the builder ran dry")
    return ran


#: An older memory and a newer one the likely-update rules read as a change of it.
_PAIRS = (
    ("My gym is {}.", "I cancelled {} and joined a pool."),
    ("I ride a {} scooter to the office.", "I sold the {} scooter and walk now."),
    ("My dentist is Dr {}.", "I switched from Dr {} to a new dentist."),
)


def likely_update_pairs(
    client: MemoryClient, user: str, pairs: int, rng: random.Random
) -> list[uuid.UUID]:
    """Store ``pairs`` (older, newer) memory pairs; their events."""
    stored = []
    for i in range(pairs):
        older, newer = _PAIRS[i % len(_PAIRS)]
        name = rng.choice(VOCABULARY).capitalize()
        stored.append(client.store(older.format(name), user_id=user))
        stored.append(client.store(newer.format(name), user_id=user))
    return stored


def judge_likely_updates(client: MemoryClient, user: str) -> list[uuid.UUID]:
    """Let the likely-update worker judge the log; the decisions it recorded for ``user``."""
    client.context.updates.run_pending()
    ctx = client.context
    return [
        e.event_id
        for e in ctx.store.read_stream(ctx.namespace, user)
        if e.type == ev.LIKELY_UPDATE and e.data is not None
    ]


def correct(
    client: MemoryClient, user: str, history: Sequence[uuid.UUID], rng: random.Random
) -> list[uuid.UUID]:
    """Supersede a hundredth of the memories (at least five) by later ones; the events."""
    pairs = max(5, len(history) // 100)
    chosen = rng.sample(range(len(history)), 2 * pairs)
    corrections = []
    for a, b in zip(chosen[::2], chosen[1::2], strict=True):
        older, newer = sorted((a, b))  # the later memory corrects the earlier one
        [old_node] = client.get_event_nodes(history[older], user_id=user)
        [new_node] = client.get_event_nodes(history[newer], user_id=user)
        correction = client.supersede(old_node.id, new_node.id, user_id=user)
        corrections.append(correction.event_id)
    return corrections


def certified_delete(
    client: MemoryClient, user: str, event_id: uuid.UUID
) -> tuple[float, list[str]]:
    """Milliseconds from delete_event to a verified certificate; what each proof replayed."""

    def delete() -> dict[str, Any]:
        request = client.delete_event(event_id, user_id=user).request_id
        client.context.rebuilder.run_pending()
        status = client.erasure_status(request)
        if status.certificate is None:
            raise BenchError(f"delete_event ended {status.status} without a certificate")
        return client.verify_certificate(status.certificate)

    seconds, payload = timed(delete)
    if not all(p["equal"] for p in payload["projections"]):
        raise BenchError(f"a certificate says live and replay differ: {payload['projections']}")
    proofs = [p.get("proof", {}).get("replayed", "stream") for p in payload["projections"]]
    return seconds * 1000, proofs


def size_section(r: SizeResult) -> Section:
    return Section(
        f"subject of {r.size:,} memories",
        [
            Figure(
                f"certified_delete_{r.size}_median_ms",
                f"delete_event → verified certificate, median of {len(r.delete_ms)}",
                statistics.median(r.delete_ms),
                "ms",
            ),
            Figure(f"certified_delete_{r.size}_max_ms", "  slowest", max(r.delete_ms), "ms"),
            Figure(
                f"certified_delete_{r.size}_first_ms",
                "  the subject's first certified delete",
                r.first_ms,
                "ms",
            ),
            Figure(f"load_{r.size}_s", "loading the subject (log + graph)", r.load_seconds, "s"),
            Figure(f"catch_up_{r.size}_s", "  its vectors", r.catch_up_seconds, "s"),
            Figure(
                f"snapshot_build_{r.size}_s",
                "  its snapshots, built as in the background",
                r.snapshot_seconds,
                "s",
            ),
        ],
    )
