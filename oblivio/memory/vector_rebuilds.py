"""Operator operations on the vector state: re-embedding jobs (start, watch, list).

The work itself is done by :class:`workers.reembed.VectorRebuilder` in every
worker process (``oblivio worker``, ``oblivio serve``) and by
``oblivio rebuild vectors`` while it waits.
"""

from __future__ import annotations

import uuid

from eventstore.errors import ConflictError, NotFoundError
from eventstore.ids import parse_uuid
from oblivio.memory import inputs
from oblivio.memory.context import MemoryContext
from projections.embedders import EmbedderUnavailableError
from workers.reembed import RebuildProgress, RebuildRequest


class VectorRebuildUnavailableError(NotFoundError):
    """No such vector rebuild."""


class EmbedderNotLoadableError(ConflictError):
    """A well-formed embedder name this process cannot load: a model that is not on this
    host, an extra that is not installed, an endpoint that cannot be reached."""


def start_vector_rebuild(
    ctx: MemoryContext,
    *,
    embedder: str | None = None,
    user_id: str | None = None,
    actor_id: str | None = None,
) -> RebuildProgress:
    """Re-embed one subject's nodes, or (``user_id=None``) every subject's.

    ``embedder`` names the embedder to move the store to (every subject: no
    ``user_id``); ``None`` re-embeds with the store's own (vectors missing
    after a crash or a restore).  Returns the job's progress; it runs in the
    workers.
    """
    stream_id = None
    if user_id is not None:
        head = ctx.store.head(ctx.namespace, inputs.user(user_id))
        if head is None or head.closed_at is not None:
            raise VectorRebuildUnavailableError(f"no memories of user {user_id!r} to re-embed")
        stream_id = head.stream.stream_id
    actor = None if actor_id is None else ctx.store.pseudonym("actor", actor_id)
    request = RebuildRequest(embedder=embedder, stream_id=stream_id, requested_by=actor)
    try:
        started = ctx.reembedder.start(request)
    except EmbedderUnavailableError as unloadable:
        raise EmbedderNotLoadableError(str(unloadable)) from unloadable
    return ctx.reembedder.progress(started)


def vector_rebuild(ctx: MemoryContext, rebuild_id: uuid.UUID | str) -> RebuildProgress:
    """A re-embedding job's progress (subjects and nodes done of how many)."""
    try:
        return ctx.reembedder.progress(parse_uuid(rebuild_id, "rebuild_id"))
    except NotFoundError as missing:
        raise VectorRebuildUnavailableError(str(missing)) from missing


def recent_vector_rebuilds(ctx: MemoryContext, limit: int = 50) -> list[RebuildProgress]:
    """The ``limit`` most recent re-embedding jobs' progress, newest first (counts only)."""
    return ctx.reembedder.recent(limit)
