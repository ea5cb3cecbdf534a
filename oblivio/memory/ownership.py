"""Who owns what: locking the owner's stream and checking nodes and evidence against it.

Every command locks the owning stream *before* reading the state it
validates, so no other writer can change that state between the checks and
the append.  A caller bound to a user id sees other owners' nodes exactly as
it sees nodes that do not exist.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from eventstore import LockedStream, Subject, SubjectCipher, Transaction
from oblivio.errors import (
    EvidenceUnavailableError,
    IdempotencyConflictError,
    NodeUnavailableError,
    OwnerScopeMismatchError,
)
from oblivio.memory.context import MemoryContext
from projections.graph import operation_fingerprint
from projections.reads import GraphReads, NodeRow


def lock_owner(
    ctx: MemoryContext, tx: Transaction, node_ids: Sequence[uuid.UUID], user_id: str | None
) -> tuple[LockedStream, list[NodeRow]]:
    """Lock the stream owning ``node_ids`` and return their rows, read after the lock.

    All nodes must exist in that stream and share one scope.
    """
    graph = GraphReads(tx)
    stream = _lock_stream_for(ctx, tx, graph, node_ids[0], user_id)
    rows = {row.node_id: row for row in graph.node_rows(node_ids)}
    for node_id in node_ids:
        row = rows.get(node_id)
        if row is None:
            raise NodeUnavailableError()
        if row.stream_id != stream.ref.stream_id:
            # A bound caller must not learn that a foreign node exists.
            raise NodeUnavailableError() if user_id is not None else OwnerScopeMismatchError()
    ordered = [rows[i] for i in node_ids]
    if len({row.scope for row in ordered}) > 1:
        raise OwnerScopeMismatchError()
    return stream, ordered


def _lock_stream_for(
    ctx: MemoryContext,
    tx: Transaction,
    graph: GraphReads,
    node_id: uuid.UUID,
    user_id: str | None,
) -> LockedStream:
    if user_id is not None:
        stream = tx.lock_stream(Subject(ctx.namespace, user_id))
    else:
        row = graph.node_row(ctx.namespace, node_id)
        stream = None if row is None else tx.lock_stream(row.stream_id)
    if stream is None or stream.ref.namespace != ctx.namespace or stream.closed_at is not None:
        raise NodeUnavailableError()
    return stream


def check_evidence(
    tx: Transaction, evidence_id: uuid.UUID | None, stream_id: int, scope: str
) -> None:
    """Evidence, when given, must be a live memory event of the same owner and scope."""
    if evidence_id is None:
        return
    row = GraphReads(tx).memory_event(stream_id, evidence_id)
    if row is None or row.scope != scope:
        raise EvidenceUnavailableError()


def earlier_operation(
    tx: Transaction, cipher: SubjectCipher, key: str, request: dict[str, Any]
) -> uuid.UUID | None:
    """The event of an earlier identical request under ``key``; a different one conflicts."""
    row = GraphReads(tx).operation(cipher.stream_id, key)
    if row is None:
        return None
    if row.fingerprint != operation_fingerprint(cipher, key, request):
        raise IdempotencyConflictError()
    event_id: uuid.UUID = row.event_id
    return event_id
