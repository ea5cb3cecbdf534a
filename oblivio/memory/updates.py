"""Confirming or rejecting a likely update (the detector's decision, ``workers.updates``).

Both are explicit calls on the older memory.  Confirming is the journaled
supersede of the seed (the older memory retires in favour of the newer one,
with the newer memory's event as evidence); rejecting appends
``memory.likely_update_rejected``, after which both memories stand as before.
Either checks, under the owner's lock, that a newer memory likely updates the
node and that the decision is still open, and writes nothing otherwise.
"""

from __future__ import annotations

import uuid
from typing import Any

from eventstore import NewEvent, Transaction
from oblivio.errors import NoLikelyUpdateError
from oblivio.memory import commands, inputs
from oblivio.memory.context import MemoryContext
from oblivio.memory.ownership import lock_owner
from oblivio.memory.records import Correction, Rejection
from projections import events as ev
from projections.model import EdgeKind, LifecycleState
from projections.reads import GraphReads


def confirm_likely_update(
    ctx: MemoryContext,
    node_id: uuid.UUID | str,
    *,
    user_id: str | None = None,
    actor_id: str | None = None,
) -> Correction:
    """Supersede ``node_id`` by the newer memory that likely updates it."""
    old, user, actor = _inputs(node_id, user_id, actor_id)
    with ctx.store.transaction() as tx:
        lock_owner(ctx, tx, [old], user)
        edge = _open_decision(tx, old)
        [new] = GraphReads(tx).node_rows([edge.source_node])
        return commands.supersede_locked(ctx, tx, old, new.node_id, new.event_id, user, actor)


def reject_likely_update(
    ctx: MemoryContext,
    node_id: uuid.UUID | str,
    *,
    user_id: str | None = None,
    actor_id: str | None = None,
) -> Rejection:
    """Reject the decision that a newer memory likely updates ``node_id``: both stand."""
    old, user, actor = _inputs(node_id, user_id, actor_id)
    with ctx.store.transaction() as tx:
        stream, _ = lock_owner(ctx, tx, [old], user)
        edge = _open_decision(tx, old)
        data = ev.with_checksum(
            {
                "old_node_id": str(old),
                "new_node_id": str(edge.source_node),
                "decision_event_id": str(edge.event_id),
                "actor_id": actor,
            }
        )
        recorded, _ = commands.append_projected(
            ctx, tx, stream, NewEvent(ev.LIKELY_UPDATE_REJECTED, data)
        )
        return Rejection(recorded.event_id, edge.event_id, (old, edge.source_node))


def _inputs(
    node_id: uuid.UUID | str, user_id: str | None, actor_id: str | None
) -> tuple[uuid.UUID, str | None, str | None]:
    old = inputs.node_id(node_id)
    user = None if user_id is None else inputs.user(user_id)
    actor = inputs.optional_text(actor_id, "actor_id", inputs.MAX_ACTOR_ID_CHARS)
    return old, user, actor


def _open_decision(tx: Transaction, old: uuid.UUID) -> Any:
    """The open LIKELY_UPDATES edge into ``old`` (the latest), while ``old`` stands."""
    graph = GraphReads(tx)
    edges = [
        e
        for e in graph.edges_touching(old)
        if e.kind == EdgeKind.LIKELY_UPDATES and e.target_node == old and e.resolved_at is None
    ]
    [row] = graph.node_rows([old])
    if not edges or row.lifecycle == LifecycleState.SUPERSEDED:
        raise NoLikelyUpdateError()
    return edges[-1]
