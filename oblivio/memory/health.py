"""Operational health: how far asynchronous projections lag behind the log."""

from __future__ import annotations

from oblivio.memory.context import MemoryContext


def projection_lag(ctx: MemoryContext) -> dict[str, int]:
    """Per projection: events visible in the log that its checkpoints have not applied."""
    runner = ctx.runner
    pending = 0
    for partition in range(runner.partitions):
        cursor = runner.checkpoint(partition)
        page = ctx.store.read_all(cursor, 1000, partition=(partition, runner.partitions))
        pending += len(page.events)
    return {runner.projection.name: pending}
