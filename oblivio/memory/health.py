"""Operational health: how far asynchronous projections lag behind the log."""

from __future__ import annotations

from oblivio.memory.context import MemoryContext


def projection_lag(ctx: MemoryContext) -> dict[str, int]:
    """Per projection: events visible in the log that its checkpoints have not applied
    (counted, never read: the health check is public)."""
    runner = ctx.runner
    pending = 0
    for partition in range(runner.partitions):
        cursor = runner.checkpoint(partition)
        pending += ctx.store.count_after(cursor, partition=(partition, runner.partitions))
    return {runner.projection.name: pending}
