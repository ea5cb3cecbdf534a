"""``oblivio bench erasure``: forget to a verified certificate, and delete_event, as data grows.

The store first holds 10,000 events of other subjects, then 500,000 (both
times ``--scale``).  The background is loaded through the batched command
path (log and node graph, 500 events per transaction) and its vectors
caught up; both are timed separately and are not part of any erasure
figure.  In each phase, subjects of 1,000 memories are then each forgotten
with ``forget(wait=True)`` (the caller helps the rebuild worker until the
certificate is signed) and the certificate verified with
``verify_certificate``; the time of those two calls is the figure.
Finally single events of one more such subject are erased with
``delete_event`` (which returns before its rebuild jobs run), and the queued
jobs are drained, so the figures give both the call's rate and the rate of
deletes that reach a certificate.
"""

from __future__ import annotations

import random
import statistics
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from oblivio.client import MemoryClient
from oblivio_bench.config import RunConfig
from oblivio_bench.figures import Figure, FigureReport, Section, at_most
from oblivio_bench.loading import (
    LOAD_BATCH,
    check_applied,
    load_subject,
    open_client,
    scratch_settings,
    wait_until_visible,
)
from oblivio_bench.report import load_average, machine_info
from oblivio_bench.scratch import postgres_version
from oblivio_bench.systems import BenchError
from oblivio_bench.workloads import timed

Progress = Callable[[str], None]

#: (name, events of other subjects) at --scale 1.
PHASES = (("10k", 10_000), ("500k", 500_000))
SUBJECT_EVENTS = 1_000
BACKGROUND_SUBJECT_EVENTS = LOAD_BATCH
DELETES = 10
SEED = 1729

TARGET_FORGET_MS = 250.0
TARGET_GROWTH = 1.3


@dataclass(frozen=True)
class ErasureBenchConfig(RunConfig):
    """What to run: backend, forgets per phase (``rounds``), background size (``scale``)
    and subject size."""

    subject_events: int = SUBJECT_EVENTS

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.subject_events < 2:
            raise BenchError("subject events must be at least 2")

    @property
    def deletes(self) -> int:
        return max(1, min(DELETES, self.subject_events // 2))

    def phases(self) -> list[Phase]:
        return [Phase(name, max(1, round(events * self.scale))) for name, events in PHASES]


@dataclass(frozen=True)
class Phase:
    #: Background size at --scale 1, which names the phase's figures ("500k").
    name: str
    background: int


@dataclass(frozen=True)
class PhaseResult:
    phase: Phase
    #: Background events loaded for this phase (the earlier phase's stay).
    loaded: int
    load_seconds: float
    catch_up_seconds: float
    forget_ms: Sequence[float]
    deletes: int
    delete_seconds: float
    drain_seconds: float

    @property
    def forget_median_ms(self) -> float:
        return statistics.median(self.forget_ms)

    def to_json(self) -> dict[str, Any]:
        return {
            "background_events": self.phase.background,
            "background_loaded": self.loaded,
            "load_seconds": self.load_seconds,
            "catch_up_seconds": self.catch_up_seconds,
            "forget_ms": list(self.forget_ms),
            "forget_median_ms": self.forget_median_ms,
            "deletes": self.deletes,
            "delete_seconds": self.delete_seconds,
            "rebuild_drain_seconds": self.drain_seconds,
        }


# -- the run ------------------------------------------------------------------------------


def run_erasure_bench(
    config: ErasureBenchConfig, progress: Progress = lambda _: None
) -> FigureReport:
    """Grow the background phase by phase and time erasures at each size."""
    with (
        scratch_settings(config.backend, config.server_url, ["erasure"]) as settings,
        open_client(settings["erasure"]) as client,
    ):
        server = postgres_version(config.server_url) if config.backend == "postgres" else None
        machine = machine_info(server)
        results: list[PhaseResult] = []
        rng = random.Random(SEED)
        for phase in config.phases():
            already = results[-1].phase.background if results else 0
            results.append(run_phase(client, config, phase, already, rng, progress))
        machine["load_average_end"] = load_average()
    return FigureReport.of_run(
        "oblivio bench erasure",
        config,
        machine,
        parameters={
            "subject_events": config.subject_events,
            "forgets_per_phase": config.rounds,
            "deletes_per_phase": config.deletes,
            "background_subject_events": BACKGROUND_SUBJECT_EVENTS,
            "background_events": {p.name: p.background for p in config.phases()},
        },
        sections=[phase_section(config, r) for r in results] + [growth_section(results)],
        details={r.phase.name: r.to_json() for r in results},
    )


def run_phase(
    client: MemoryClient,
    config: ErasureBenchConfig,
    phase: Phase,
    already: int,
    rng: random.Random,
    progress: Progress,
) -> PhaseResult:
    added = phase.background - already
    client.context.runner.run_pending()  # the earlier phase's audit entries; not timed
    progress(f"{phase.name}: loading {added:,} background events (batched, timed apart)")
    load_seconds, _ = timed(lambda: grow_background(client, already, phase.background, rng))
    catch_up_seconds = catch_up(client, added)
    progress(
        f"{phase.name}: background loaded in {load_seconds:,.1f} s, vectors in "
        f"{catch_up_seconds:,.1f} s; loading {config.rounds + 1} subjects of "
        f"{config.subject_events:,} events (not timed)"
    )
    forgetting, deleting = load_subjects(client, config, phase, rng)
    forget_ms = [time_forget(client, u, config.subject_events, progress) for u in forgetting]
    delete_seconds, drain_seconds = time_deletes(client, deleting, config.deletes, progress)
    return PhaseResult(
        phase=phase,
        loaded=added,
        load_seconds=load_seconds,
        catch_up_seconds=catch_up_seconds,
        forget_ms=forget_ms,
        deletes=config.deletes,
        delete_seconds=delete_seconds,
        drain_seconds=drain_seconds,
    )


def load_subjects(
    client: MemoryClient, config: ErasureBenchConfig, phase: Phase, rng: random.Random
) -> tuple[list[str], str]:
    """The phase's subjects to forget and the one to delete from, loaded and caught up."""
    forgetting = [f"forget-{phase.name}-{i}" for i in range(config.rounds)]
    deleting = f"delete-{phase.name}"
    for user in [*forgetting, deleting]:
        load_subject(client.context, user, config.subject_events, rng)
    catch_up(client, (config.rounds + 1) * config.subject_events)
    return forgetting, deleting


def grow_background(client: MemoryClient, start: int, end: int, rng: random.Random) -> None:
    """Events ``start`` to ``end`` of the background, in subjects of 500 events."""
    position = start
    while position < end:
        subject, offset = divmod(position, BACKGROUND_SUBJECT_EVENTS)
        count = min(BACKGROUND_SUBJECT_EVENTS - offset, end - position)
        load_subject(client.context, f"background-{subject}", count, rng)
        position += count


def catch_up(client: MemoryClient, pending: int) -> float:
    """Seconds the projection runner takes to apply the ``pending`` events just loaded."""
    wait_until_visible(client.context, pending)
    seconds, applied = timed(client.context.runner.run_pending)
    check_applied(applied, pending)
    return seconds


def time_forget(client: MemoryClient, user: str, events: int, progress: Progress) -> float:
    """Milliseconds from ``forget`` to a verified certificate covering ``events`` events."""
    seconds, payload = timed(lambda: _forget_and_verify(client, user))
    erased = payload["erasure"]["events_erased"]
    if erased != events:
        raise BenchError(f"the certificate of {user} covers {erased} events, expected {events}")
    progress(f"forget {user}: {seconds * 1000:,.1f} ms to a verified certificate")
    return seconds * 1000


def _forget_and_verify(client: MemoryClient, user: str) -> dict[str, Any]:
    status = client.forget(user, wait=True)
    if status.certificate is None:
        raise BenchError(f"forget({user!r}) ended {status.status} without a certificate")
    return client.verify_certificate(status.certificate)


def time_deletes(
    client: MemoryClient, user: str, count: int, progress: Progress
) -> tuple[float, float]:
    """Seconds of ``count`` ``delete_event`` calls, and of draining their rebuild jobs."""
    event_ids = [event.id for event in client.get_events(user_id=user, limit=count)]
    delete_seconds, requests = timed(lambda: [_delete(client, e) for e in event_ids])
    progress(f"delete_event: {count / delete_seconds:,.2f} calls/s; draining the rebuild jobs")
    drain_seconds, _ = timed(client.context.rebuilder.run_pending)
    unfinished = [r for r in requests if client.erasure_status(r).status != "completed"]
    if unfinished:
        raise BenchError(f"{len(unfinished)} delete_event requests did not complete")
    return delete_seconds, drain_seconds


def _delete(client: MemoryClient, event_id: uuid.UUID) -> uuid.UUID:
    return client.delete_event(event_id).request_id


# -- figures ------------------------------------------------------------------------------


def phase_section(config: ErasureBenchConfig, r: PhaseResult) -> Section:
    name, subject = r.phase.name, f"{config.subject_events:,}-event subject"
    return Section(
        f"store holding {r.phase.background:,} events of other subjects",
        [
            Figure(
                f"forget_{name}_median_ms",
                f"forget + verify, {subject}, median of {len(r.forget_ms)}",
                r.forget_median_ms,
                "ms",
                at_most(TARGET_FORGET_MS),
                applies=config.subject_events >= SUBJECT_EVENTS,
            ),
            Figure(f"forget_{name}_max_ms", "  slowest forget + verify", max(r.forget_ms), "ms"),
            Figure(
                f"delete_event_{name}_ops_per_s",
                f"delete_event calls/s, {subject}",
                r.deletes / r.delete_seconds,
                "ops/s",
            ),
            Figure(
                f"delete_certified_{name}_ops_per_s",
                "  deletes/s through their certificates",
                r.deletes / (r.delete_seconds + r.drain_seconds),
                "ops/s",
            ),
            Figure(
                f"background_{name}_load_s",
                f"loading {r.loaded:,} background events (log + graph)",
                r.load_seconds,
                "s",
            ),
            Figure(
                f"background_{name}_load_events_per_s",
                "  load rate",
                r.loaded / r.load_seconds,
                "events/s",
            ),
            Figure(
                f"background_{name}_catch_up_events_per_s",
                "  their vectors: catch-up rate",
                r.loaded / r.catch_up_seconds,
                "events/s",
            ),
        ],
    )


def growth_section(results: Sequence[PhaseResult]) -> Section:
    first, last = results[0], results[-1]
    return Section(
        "growth",
        [
            Figure(
                "forget_growth_ratio",
                f"forget median at {last.phase.background:,} / at {first.phase.background:,}",
                last.forget_median_ms / first.forget_median_ms,
                "×",
                at_most(TARGET_GROWTH),
            )
        ],
        [
            "forget + verify: forget(wait=True) (synchronous erasure, rebuild jobs, signed "
            "certificate) then verify_certificate against the store's JWKS",
            "delete_event: the call returns once the event is erased; its rebuild jobs are "
            "drained afterwards with RebuildWorker.run_pending",
        ],
    )
