"""State digests of one subject: live projections against a fresh replay of the log."""

from __future__ import annotations

from oblivio.memory import inputs
from oblivio.memory.context import MemoryContext
from oblivio.memory.queries import wait_for_vectors
from workers.replay import compare


def replay_comparison(ctx: MemoryContext, *, user_id: str) -> dict[str, tuple[str, str]]:
    """Per projection: (live digest, replayed digest). Equal pairs mean replay = incremental."""
    stream_id = wait_for_vectors(ctx, inputs.user(user_id))
    if stream_id is None:
        return {}
    return compare(ctx.store, ctx.projections, stream_id)
