"""The node graph's read facade: what the application's commands and queries, and the
workers, read of the inline projection, on the caller's read view or transaction.

``oblivio.memory`` and ``workers`` read the graph only through :class:`GraphReads`
(and ranked retrieval through :mod:`projections.retrieval_service`): the stores
under ``projections.storage``, with their writes and purges, stay inside this package.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator
from datetime import datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from projections.model import Scope
from projections.storage import graph_queries as queries
from projections.storage.claim_store import ClaimRow, ClaimStore
from projections.storage.graph_store import GraphStore, NodeRow, node_from_row, state_of
from projections.storage.item_store import ItemRow, ItemStore

__all__ = ["ClaimRow", "GraphReads", "ItemRow", "NodeRow", "node_from_row", "state_of"]


class HasConnection(Protocol):
    """A read view or a transaction of the log (``eventstore.ReadView``, ``Transaction``)."""

    @property
    def connection(self) -> Connection: ...


class GraphReads:
    """Read-only queries of the node graph, its claims and its keyed items."""

    def __init__(self, view: HasConnection) -> None:
        conn = self._conn = view.connection
        self._graph, self._claims, self._items = GraphStore(conn), ClaimStore(conn), ItemStore(conn)

    # -- nodes ----------------------------------------------------------------------

    def node_row(self, namespace: str, node_id: uuid.UUID) -> NodeRow | None:
        """Node ``node_id`` if it is one of ``namespace``'s (else, as unknown, None)."""
        return queries.node_row(self._conn, namespace, node_id)

    def node_rows(self, node_ids: Collection[uuid.UUID]) -> list[NodeRow]:
        return self._graph.node_rows(node_ids)

    def nodes_of_event(self, event_id: uuid.UUID, *, namespace: str | None = None) -> list[NodeRow]:
        """The nodes an event derived, in extraction order; none if ``namespace`` is
        given and the event is not one of its streams'."""
        return queries.nodes_of_event(self._conn, event_id, namespace=namespace)

    def stream_nodes(self, stream_id: int, **filters: Any) -> list[NodeRow]:
        """The stream's nodes matching the filters of ``GraphStore.stream_nodes`` (lifecycles,
        scopes, node and source types, archived, a position to start after, a limit), by
        (created_at, node_id)."""
        return self._graph.stream_nodes(stream_id, **filters)

    def edges_touching(self, node_id: uuid.UUID) -> list[sa.Row[Any]]:
        return queries.edges_touching(self._conn, node_id)

    def stream_edges(self, stream_id: int) -> list[sa.Row[Any]]:
        return self._graph.stream_edges(stream_id)

    def streams_for_tier(self, capacity: int) -> list[int]:
        """Streams whose retrieval tier the archiving job may change: more than
        ``capacity`` current nodes not archived, or current nodes archived."""
        return queries.streams_for_tier(self._conn, capacity)

    def open_edges(self, stream_id: int, kind: str) -> list[sa.Row[Any]]:
        """The stream's unresolved edges of ``kind`` (likely updates, contradictions)."""
        return queries.open_edges(self._conn, stream_id, kind)

    def claim(self, stream_id: int, node_id: uuid.UUID) -> ClaimRow | None:
        return self._claims.claim(stream_id, node_id)

    # -- events, operations, subjects -------------------------------------------------

    def memory_event(self, stream_id: int, event_id: uuid.UUID) -> sa.Row[Any] | None:
        """The live memory event ``event_id`` of stream ``stream_id``."""
        return queries.memory_event(self._conn, stream_id, event_id)

    def operation(self, stream_id: int, key: str) -> sa.Row[Any] | None:
        """What an idempotency key was first used for, if it was."""
        return queries.operation(self._conn, stream_id, key)

    def one_event_per_subject(self, namespace: str) -> list[uuid.UUID]:
        return queries.one_event_per_subject(self._conn, namespace)

    def events_recorded_before(
        self,
        namespace: str,
        scope: Scope,
        cutoff: datetime,
        limit: int,
        *,
        skip_subjects: Collection[bytes] = (),
    ) -> list[uuid.UUID]:
        """Live memory events of ``scope`` in ``namespace`` recorded before ``cutoff``
        (the retention sweep's), oldest first, none of the subjects in ``skip_subjects``."""
        return queries.events_recorded_before(
            self._conn, namespace, scope, cutoff, limit, skip_subjects=skip_subjects
        )

    def subjects_with_events_before(
        self, namespace: str, scope: Scope, cutoff: datetime, subjects: Collection[bytes]
    ) -> int:
        """How many of ``subjects`` a retention sweep with ``cutoff`` skipped."""
        return queries.subjects_with_events_before(self._conn, namespace, scope, cutoff, subjects)

    def current_counts(self, stream_id: int) -> list[tuple[str, str, int]]:
        """(scope, node type, count) of the stream's current (not superseded) nodes:
        content-free, nothing decrypted."""
        return queries.current_counts(self._conn, stream_id)

    def live_memory_events(
        self, stream_id: int, event_ids: Collection[uuid.UUID]
    ) -> set[uuid.UUID]:
        """Which of ``event_ids`` are live memory events of stream ``stream_id``."""
        return queries.live_memory_events(self._conn, stream_id, event_ids)

    def needs_rebuild(self, stream_id: int) -> bool:
        """Whether the stream's graph predates its dependency rows (migration pj0008)."""
        return self._graph.needs_rebuild(stream_id)

    def marked_streams(self, after: int, limit: int) -> list[int]:
        """Streams marked for a rebuild of their graph, a page after ``after``."""
        return self._graph.marked_streams(after, limit)

    def count_marked(self) -> int:
        """How many streams are marked for a rebuild of their graph."""
        return self._graph.count_marked()

    # -- keyed items ------------------------------------------------------------------

    def item_revisions(self, stream_id: int, item: bytes) -> list[ItemRow]:
        """The readable revisions of one item, in the order their values took effect."""
        return self._items.revisions(stream_id, item)

    def stream_items(
        self, stream_id: int, wanted: Collection[bytes] | None = None
    ) -> Iterator[list[ItemRow]]:
        """Every item of a stream (or of these keyed hashes), as its revisions (oldest
        first), in item order."""
        return self._items.stream_items(stream_id, wanted)
