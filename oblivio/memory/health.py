"""Operational health: how far asynchronous projections lag behind the log."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from oblivio.memory.context import MemoryContext

#: How long one process reuses a lag figure (seconds).
LAG_REPORT_SECONDS = 1.0


def partition_lag(ctx: MemoryContext) -> dict[str, list[int]]:
    """Per projection, per partition: events visible in the log that the
    partition's checkpoint has not applied (counted, never read)."""
    runner = ctx.runner
    pending = []
    for partition in range(runner.partitions):
        cursor = runner.checkpoint(partition)
        pending.append(ctx.store.count_after(cursor, partition=(partition, runner.partitions)))
    return {runner.projection.name: pending}


def projection_lag(ctx: MemoryContext) -> dict[str, int]:
    """Per projection: the events its checkpoints have not applied, over all
    partitions (the health check is public, so this is a count only)."""
    return {name: sum(partitions) for name, partitions in partition_lag(ctx).items()}


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
