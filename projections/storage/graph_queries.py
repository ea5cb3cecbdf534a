"""Read-only queries of the node graph that its projection does not need itself.

They answer the application (through ``projections.reads.GraphReads``) and the
workers (archiving, retention, extraction); ``GraphStore`` keeps what the node
graph projection reads and writes while it applies events.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.schema import events, streams
from projections.model import LifecycleState, Scope
from projections.storage.graph_store import CURRENT_LIFECYCLES, NODES_BY_ID, NodeRow
from projections.storage.tables import edges, memory_events, node_directory, nodes, operations

# A node by id within one namespace (parameters ``node_id``, ``namespace``): one
# statement, so another namespace's id costs what an unknown id costs and
# answers the same (nothing).
_node_in_namespace = (
    NODES_BY_ID.join(streams, streams.c.stream_id == node_directory.c.stream_id)
    .where(node_directory.c.node_id == sa.bindparam("node_id", type_=sa.Uuid()))
    .where(streams.c.namespace == sa.bindparam("namespace", type_=sa.String()))
)


def events_recorded_before(
    conn: Connection,
    namespace: str,
    scope: Scope,
    cutoff: datetime,
    limit: int,
    *,
    skip_subjects: Collection[bytes] = (),
) -> list[uuid.UUID]:
    """Live memory events of ``scope`` in ``namespace`` recorded before ``cutoff``
    (but none of the subjects whose keys are in ``skip_subjects``)."""
    query = _recorded_before(namespace, scope, cutoff)
    if skip_subjects:
        query = query.where(streams.c.subject_key.not_in(list(skip_subjects)))
    return list(conn.execute(query.order_by(memory_events.c.recorded_at).limit(limit)).scalars())


def subjects_with_events_before(
    conn: Connection, namespace: str, scope: Scope, cutoff: datetime, subjects: Collection[bytes]
) -> int:
    """How many of ``subjects`` have live memory events of ``scope`` recorded before
    ``cutoff`` (the subjects a retention sweep skipped)."""
    if not subjects:
        return 0
    query = (
        _recorded_before(namespace, scope, cutoff)
        .with_only_columns(sa.func.count(sa.distinct(streams.c.subject_key)))
        .where(streams.c.subject_key.in_(list(subjects)))
    )
    return int(conn.execute(query).scalar_one())


def _recorded_before(namespace: str, scope: Scope, cutoff: datetime) -> sa.Select[Any]:
    return (
        sa.select(memory_events.c.event_id)
        .join(streams, streams.c.stream_id == memory_events.c.stream_id)
        .where(
            streams.c.namespace == namespace,
            memory_events.c.scope == scope.value,
            memory_events.c.recorded_at < cutoff,
        )
    )


def current_counts(conn: Connection, stream_id: int) -> list[tuple[str, str, int]]:
    """(scope, node type, count) of the stream's current (not superseded) nodes."""
    query = (
        sa.select(nodes.c.scope, nodes.c.node_type, sa.func.count())
        .where(
            nodes.c.stream_id == stream_id,
            nodes.c.lifecycle != LifecycleState.SUPERSEDED.value,
        )
        .group_by(nodes.c.scope, nodes.c.node_type)
        .order_by(nodes.c.scope, nodes.c.node_type)
    )
    return [(str(r[0]), str(r[1]), int(r[2])) for r in conn.execute(query)]


def live_memory_events(
    conn: Connection, stream_id: int, event_ids: Collection[uuid.UUID]
) -> set[uuid.UUID]:
    """Which of ``event_ids`` are live memory events of stream ``stream_id``."""
    query = sa.select(memory_events.c.event_id).where(
        memory_events.c.stream_id == stream_id, memory_events.c.event_id.in_(list(event_ids))
    )
    return set(conn.execute(query).scalars())


def one_event_per_subject(conn: Connection, namespace: str) -> list[uuid.UUID]:
    """One live memory event of each open stream in ``namespace`` (any of its events):
    what names each subject that still has memories, to be decrypted by the caller."""
    # A join grouped by stream, not a subquery per stream correlated with
    # ``streams``: Citus plans neither a correlated subquery nor a direct join
    # across its coordinator's ``streams`` and the workers' shards, but it plans
    # this join by sending the namespace's open streams to the shards.  It reads
    # every memory event of the namespace once; a listing of people is an
    # administrator's call, not a request path.  uuid has no min() in
    # PostgreSQL, so the smallest id is taken as text (hex on SQLite).
    one_event = sa.func.min(sa.cast(memory_events.c.event_id, sa.String))
    query = (
        sa.select(one_event)
        .select_from(memory_events.join(streams, memory_events.c.stream_id == streams.c.stream_id))
        .where(streams.c.namespace == namespace, streams.c.closed_at.is_(None))
        .group_by(memory_events.c.stream_id)
    )
    return [uuid.UUID(text) for text in conn.execute(query).scalars()]


def memory_event(conn: Connection, stream_id: int, event_id: uuid.UUID) -> sa.Row[Any] | None:
    """The live memory event ``event_id`` of stream ``stream_id`` (the table's key)."""
    query = sa.select(memory_events).where(
        memory_events.c.stream_id == stream_id, memory_events.c.event_id == event_id
    )
    return conn.execute(query).first()


def node_row(conn: Connection, namespace: str, node_id: uuid.UUID) -> NodeRow | None:
    """Node ``node_id`` if it is one of ``namespace``'s (else, as unknown, None)."""
    params = {"node_id": node_id, "namespace": namespace}
    return conn.execute(_node_in_namespace, params).first()


def nodes_of_event(
    conn: Connection, event_id: uuid.UUID, *, namespace: str | None = None
) -> list[NodeRow]:
    """The event's nodes, in order; none if ``namespace`` is given and the event
    is not one of its streams'."""
    # The log knows the event's stream; with it the lookup is a range of
    # the subject-first key, with no index by event id alone to maintain.
    stream = sa.select(events.c.stream_id).where(events.c.event_id == event_id)
    if namespace is not None:
        stream = stream.join(streams, streams.c.stream_id == events.c.stream_id).where(
            streams.c.namespace == namespace
        )
    query = (
        sa.select(nodes)
        .where(nodes.c.stream_id == stream.scalar_subquery(), nodes.c.event_id == event_id)
        .order_by(nodes.c.ordinal)
    )
    return list(conn.execute(query))


def streams_for_tier(conn: Connection, capacity: int) -> list[int]:
    """Streams whose retrieval tier the archiving job may change: more than
    ``capacity`` current nodes not archived, or current nodes archived."""
    current = nodes.c.lifecycle.in_([s.value for s in CURRENT_LIFECYCLES])
    in_tier = sa.func.count() - sa.func.count(nodes.c.archived_at)
    query = (
        sa.select(nodes.c.stream_id)
        .where(current)
        .group_by(nodes.c.stream_id)
        .having(sa.or_(in_tier > capacity, sa.func.count(nodes.c.archived_at) > 0))
        .order_by(nodes.c.stream_id)
    )
    return list(conn.execute(query).scalars())


def edges_touching(conn: Connection, node_id: uuid.UUID) -> list[sa.Row[Any]]:
    query = sa.select(edges).where(
        sa.or_(edges.c.source_node == node_id, edges.c.target_node == node_id)
    )
    return list(conn.execute(query.order_by(edges.c.created_at, edges.c.edge_id)))


def open_edges(conn: Connection, stream_id: int, kind: str) -> list[sa.Row[Any]]:
    """A stream's unresolved edges of ``kind``, oldest first."""
    query = sa.select(edges).where(
        edges.c.stream_id == stream_id, edges.c.kind == kind, edges.c.resolved_at.is_(None)
    )
    return list(conn.execute(query.order_by(edges.c.created_at, edges.c.edge_id)))


def operation(conn: Connection, stream_id: int, key: str) -> sa.Row[Any] | None:
    query = sa.select(operations).where(
        operations.c.stream_id == stream_id, operations.c.operation_key == key
    )
    return conn.execute(query).first()
