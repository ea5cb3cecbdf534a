"""Parts of a stream's derived state: what an erasure changes, and all a certified
delete needs to replay.

A part is a set of events and the nodes they derive or touch, closed under
"an event that touches a node of the part is in the part, and so are the nodes
it touches" (the node graph's dependency rows: each node's source event, and
``memory_node_refs``).  Projection handlers read and write only the nodes their
event names, so a closed part's state is a function of its own events: replaying
them alone gives the state a replay of the whole stream gives those items, and
no item outside it depends on them.  That is what lets an erasure re-derive,
and a certificate prove, only the part its events reached.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from sqlalchemy.engine import Connection

from projections.storage.graph_store import GraphStore


@dataclass(frozen=True)
class Part:
    """Events and nodes of one stream, closed as above."""

    events: frozenset[uuid.UUID]
    nodes: frozenset[uuid.UUID]

    @property
    def anchors(self) -> frozenset[uuid.UUID]:
        """The ids an item of derived state is placed by (see ``Projection.anchored_digests``)."""
        return self.events | self.nodes

    def __len__(self) -> int:
        return len(self.events) + len(self.nodes)


def reach(
    conn: Connection,
    stream_id: int,
    events: Collection[uuid.UUID],
    nodes: Iterable[uuid.UUID] = (),
) -> Part:
    """The smallest closed part holding ``events`` and ``nodes``, from the live graph's
    dependency rows (its cost grows with the part, not the stream)."""
    store = GraphStore(conn)
    found_events = set(events)
    found_nodes = set(nodes) | store.nodes_reached(stream_id, found_events)
    frontier = store.events_reaching(stream_id, found_nodes) - found_events
    while frontier:
        found_events |= frontier
        found_nodes |= store.nodes_reached(stream_id, frontier)
        frontier = store.events_reaching(stream_id, found_nodes) - found_events
    return Part(frozenset(found_events), frozenset(found_nodes))
