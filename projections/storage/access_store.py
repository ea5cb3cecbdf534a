"""SQL of the access counts: how often retrieval returned each node (statistics, not state).

See ``node_access`` in :mod:`projections.storage.tables` for why these rows sit
outside every digest, and :mod:`projections.access` for how they are batched.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from projections.storage.tables import node_access, nodes

_stream = sa.bindparam("b_stream", type_=sa.BigInteger())
_event = sa.bindparam("b_event", type_=sa.Uuid())
_node = sa.bindparam("b_node", type_=sa.Uuid())
_at = sa.bindparam("b_at", type_=node_access.c.last_accessed_at.type)

# A count row is created only for a node that exists when the batch is
# written: a node erased after it was returned (and before its count was
# written) must not get its row back.  Writers hold the stream's lock, which
# erasure takes too, so the check and the write see the same state.
_existing_node = sa.select(_stream, _event, _node, sa.literal(0, sa.BigInteger()), _at).where(
    sa.exists().where(
        nodes.c.stream_id == _stream, nodes.c.event_id == _event, nodes.c.node_id == _node
    )
)

_add = (
    node_access.update()
    .where(
        node_access.c.stream_id == _stream,
        node_access.c.event_id == _event,
        node_access.c.node_id == _node,
    )
    .values(
        accesses=node_access.c.accesses + sa.bindparam("b_delta", type_=sa.BigInteger()),
        last_accessed_at=_at,
    )
)


_CREATE_KEYS = ("b_stream", "b_event", "b_node", "b_at")


@dataclass(frozen=True)
class Access:
    """``delta`` more retrievals of one node, the last at ``at``."""

    event_id: uuid.UUID
    node_id: uuid.UUID
    delta: int
    at: datetime


class AccessStore:
    """Reads and writes ``memory_node_access`` on one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def counts(self, stream_id: int) -> dict[uuid.UUID, int]:
        """Node id → accesses of every counted node of the stream."""
        query = sa.select(node_access.c.node_id, node_access.c.accesses).where(
            node_access.c.stream_id == stream_id
        )
        return {row.node_id: int(row.accesses) for row in self.conn.execute(query)}

    def add(
        self, insert_unless_present: Insert, stream_id: int, accesses: Sequence[Access]
    ) -> None:
        """Add ``accesses`` to the stream's counts, for nodes that still exist.

        ``insert_unless_present`` is the backend's insert-or-skip on
        ``node_access`` (:meth:`eventstore.Transaction.insert_unless_present`).
        The caller holds the stream's lock.
        """
        if not accesses:
            return
        params = [
            {
                "b_stream": stream_id,
                "b_event": a.event_id,
                "b_node": a.node_id,
                "b_delta": a.delta,
                "b_at": a.at,
            }
            for a in accesses
        ]
        create = insert_unless_present.from_select(
            ["stream_id", "event_id", "node_id", "accesses", "last_accessed_at"], _existing_node
        )
        self.conn.execute(create, [{k: p[k] for k in _CREATE_KEYS} for p in params])
        self.conn.execute(_add, params)

    def purge_stream(self, stream_id: int) -> None:
        self.conn.execute(node_access.delete().where(node_access.c.stream_id == stream_id))

    def purge_events(self, stream_id: int, event_ids: Collection[uuid.UUID]) -> None:
        """Drop the counts of the nodes the events derived (an erased event's nodes)."""
        self.conn.execute(
            node_access.delete().where(
                node_access.c.stream_id == stream_id,
                node_access.c.event_id.in_(list(event_ids)),
            )
        )
