"""Operational health: how far asynchronous projections lag behind the log, and
how erasure work stands."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from eventstore import LogCursor, jobs
from eventstore import erasure as erasure_requests
from oblivio.memory.context import MemoryContext

#: How long one process reuses a lag figure (seconds).
LAG_REPORT_SECONDS = 1.0


class _Consumer(Protocol):
    """An asynchronous reader of the log with a checkpoint per partition."""

    partitions: int

    def checkpoint(self, partition: int) -> LogCursor: ...


def _pending(ctx: MemoryContext, consumer: _Consumer) -> list[int]:
    """Per partition: events visible in the log that its checkpoint has not applied
    (counted, never read)."""
    return [
        ctx.store.count_after(
            consumer.checkpoint(partition), partition=(partition, consumer.partitions)
        )
        for partition in range(consumer.partitions)
    ]


def partition_lag(ctx: MemoryContext) -> dict[str, list[int]]:
    """Per asynchronous consumer of the log (the vector state, claim extraction),
    per partition: the events it has not applied yet."""
    return {
        ctx.runner.projection.name: _pending(ctx, ctx.runner),
        ctx.extraction.name: _pending(ctx, ctx.extraction),
        ctx.updates.name: _pending(ctx, ctx.updates),
    }


def projection_lag(ctx: MemoryContext) -> dict[str, int]:
    """Per projection: the events its checkpoints have not applied, over all
    partitions (the health check is public, so this is a count only)."""
    return {ctx.runner.projection.name: sum(_pending(ctx, ctx.runner))}


class LagReport:
    """:func:`projection_lag`, computed at most once per ``ttl`` seconds.

    The health route is public and load balancers poll it, while one figure
    costs two statements per partition and a count that grows with the
    unprojected part of the log.  Callers within ``ttl`` of the last figure
    share it; concurrent callers wait for one computation instead of each
    starting their own.  A failure (database unreachable) is not kept, so the
    next call tries again.
    """

    def __init__(
        self, ttl: float = LAG_REPORT_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._figure: dict[str, int] | None = None
        self._until = 0.0

    def __call__(self, ctx: MemoryContext) -> dict[str, int]:
        with self._lock:
            if self._figure is None or self._clock() >= self._until:
                self._figure = projection_lag(ctx)
                self._until = self._clock() + self.ttl
            return dict(self._figure)


@dataclass(frozen=True)
class ErasureFigures:
    """Erasure requests and rebuild jobs by (namespace, status), and the requests past
    their deadline by namespace."""

    requests: dict[tuple[str, str], int]
    jobs: dict[tuple[str, str], int]
    overdue: dict[str, int]


def erasure_figures(ctx: MemoryContext) -> ErasureFigures:
    """Counts only: nothing about anyone (the figures are published as metrics); of the
    caller's namespace, or of every namespace for a cluster-wide caller."""
    namespace = None if ctx.cluster_wide else ctx.namespace
    with ctx.store.reading() as view:
        return ErasureFigures(
            requests=erasure_requests.requests_by_status(view.connection, namespace),
            jobs=jobs.jobs_by_status(view.connection, namespace),
            overdue=erasure_requests.count_overdue(view.connection, ctx.clock(), namespace),
        )
