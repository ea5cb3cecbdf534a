"""SQL of the node graph: nodes, the node directory, edges, source-event index, idempotency keys."""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from eventstore import SubjectCipher
from eventstore.backends import insert_replacing, insert_rows, sent_together
from eventstore.batch import DerivedRows
from projections.model import LifecycleState, Node, NodeType, Scope, SourceType
from projections.storage.tables import (
    claims,
    edges,
    graph_backfills,
    memory_events,
    node_directory,
    node_refs,
    nodes,
    operations,
)

NodeRow = sa.Row[Any]
#: A stored event's graph rows: its id, scope, recorded time and new nodes.
StoredRows = tuple[uuid.UUID, Scope, datetime, Sequence[Node]]

#: The lifecycles retrieval returns by default: the retrieval tier (with archived_at unset).
CURRENT_LIFECYCLES = (LifecycleState.ACTIVE, LifecycleState.CONTESTED)

# The statements a stored event's rows are written with, built once, the same
# on both backends.  Nodes and their source event are new rows (a plain INSERT:
# a clash is a bug, and fails).  The node directory is the one exception, and
# its entries replace any entry of the same node (``insert_replacing``):
# replaying a subject (a rebuild job, delete_event) applies its stored events
# again after a purge that leaves the directory alone, so the entry may exist
# (it then names the same event and ordinal: node ids are a function of the
# two), and an entity's entry moves to the event that names it now.
_insert_source = memory_events.insert()
_insert_node = nodes.insert()

_insert_claim = claims.insert()


def _insert_of(conn: Connection, part: DerivedRows) -> Insert:
    """The statement that writes ``part`` on its own (a replay: the directory's
    entries replace their earlier selves, see above)."""
    if part.table is node_directory:
        return insert_replacing(conn, node_directory)
    if part.unless_present:
        raise ValueError(f"no insert-unless-present statement for {part.table.name}")
    return part.table.insert()


def stored_rows(cipher: SubjectCipher, stored: Sequence[StoredRows]) -> list[DerivedRows]:
    """The rows of stored events: their source rows, their nodes (ordinals in list
    order) and the nodes' directory entries, one part per table."""
    sources = [
        {
            "stream_id": cipher.stream_id,
            "event_id": event_id,
            "scope": scope.value,
            "recorded_at": recorded_at,
        }
        for event_id, scope, recorded_at, _ in stored
    ]
    rows = [
        _node_values(cipher, node, ordinal)
        for *_, new_nodes in stored
        for ordinal, node in enumerate(new_nodes)
    ]
    return [
        DerivedRows(memory_events, sources),
        DerivedRows(nodes, rows),
        DerivedRows(node_directory, [_directory_entry(row) for row in rows], unless_present=True),
    ]


# Nodes by id alone: the directory (by its index on node id) gives the stream,
# source event and ordinal, and memory_nodes is then read by its key.  An erased
# node's entry finds no node row (nor, when its stream is forgotten, any row of
# the stream).
NODES_BY_ID = (
    sa.select(nodes)
    .select_from(node_directory)
    .join(
        nodes,
        sa.and_(
            nodes.c.stream_id == node_directory.c.stream_id,
            nodes.c.event_id == node_directory.c.event_id,
            nodes.c.ordinal == node_directory.c.ordinal,
        ),
    )
)

# Which of some node ids have a node in a known stream: the directory gives
# each id's event and ordinal, memory_nodes is then read by its key.  Built
# once: the node graph asks it for the entities of every claims event.
_present_in_stream = (
    sa.select(node_directory.c.node_id)
    .join(
        nodes,
        sa.and_(
            nodes.c.stream_id == node_directory.c.stream_id,
            nodes.c.event_id == node_directory.c.event_id,
            nodes.c.ordinal == node_directory.c.ordinal,
        ),
    )
    .where(
        node_directory.c.stream_id == sa.bindparam("stream_id"),
        node_directory.c.node_id.in_(sa.bindparam("node_ids", expanding=True)),
    )
)

# Columns a node's lifecycle changes may touch; content never changes.
STATE_COLUMNS = (
    "lifecycle",
    "superseded_by",
    "confidence_base",
    "salience_base",
    "reinforcement_boost",
    "reinforcement_count",
    "last_reinforced_at",
    "updated_at",
    "archived_at",
    "valid_to",
)


def seal_json(cipher: SubjectCipher, purpose: str, row_id: uuid.UUID, value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return cipher.seal(purpose, row_id.bytes, text.encode())


def open_json(cipher: SubjectCipher, purpose: str, row_id: uuid.UUID, blob: bytes) -> Any:
    return json.loads(cipher.open(purpose, row_id.bytes, blob))


#: Ids bound in one statement: PostgreSQL takes at most 65,535 parameters and SQLite
#: 32,766, and a cold process bringing an older index image up to date (or a cached
#: index after a bulk import) may read the nodes of more events than that.
IDS_PER_STATEMENT = 10_000


class GraphStore:
    """Reads and writes the node-graph tables on one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    # -- source events and their nodes ----------------------------------------

    def add_rows(self, derived: Sequence[DerivedRows]) -> None:
        """Write rows derived from stored events (:func:`stored_rows`) on their own, as a
        replay does (an append writes them itself): INSERTs that return nothing, one
        wait for all of them on PostgreSQL."""
        with sent_together(self.conn):
            for part in derived:
                insert_rows(self.conn, _insert_of(self.conn, part), part.rows)

    def add_claim_nodes(
        self,
        cipher: SubjectCipher,
        new_nodes: Sequence[tuple[int, Node]],
        claim_rows: Sequence[Mapping[str, Any]],
    ) -> None:
        """Insert claim nodes, derived later from an event already recorded, each at
        its given ordinal among that event's nodes, with their ``memory_claims`` rows
        (in the same order)."""
        rows = [_node_values(cipher, node, ordinal) for ordinal, node in new_nodes]
        if not rows:
            return
        self.conn.execute(_insert_node, rows)
        self._enter(rows)
        self.conn.execute(_insert_claim, list(claim_rows))

    def add_entity_nodes(
        self, cipher: SubjectCipher, new_nodes: Sequence[tuple[int, Node]]
    ) -> None:
        """Insert ENTITY nodes, each at its given ordinal among its event's nodes.

        An entity's id is its identity's, not a function of event and ordinal:
        when the event that carried it is erased, the next one that names the
        identity carries it, so its directory entry is moved there.
        """
        rows = [_node_values(cipher, node, ordinal) for ordinal, node in new_nodes]
        if not rows:
            return
        self.conn.execute(_insert_node, rows)
        self._enter(rows)

    def _enter(self, node_rows: Sequence[Mapping[str, Any]]) -> None:
        """The nodes' directory entries, replacing any of the same nodes."""
        entries = [_directory_entry(r) for r in node_rows]
        self.conn.execute(insert_replacing(self.conn, node_directory), entries)

    # -- nodes ---------------------------------------------------------------

    def node_rows(self, node_ids: Collection[uuid.UUID]) -> list[NodeRow]:
        ids, found = list(node_ids), list[NodeRow]()
        for start in range(0, len(ids), IDS_PER_STATEMENT):  # a bound per statement
            chunk = ids[start : start + IDS_PER_STATEMENT]
            found += self.conn.execute(NODES_BY_ID.where(node_directory.c.node_id.in_(chunk)))
        return found

    def present_nodes(self, stream_id: int, node_ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
        """Which of ``node_ids`` are nodes of stream ``stream_id`` now."""
        if not node_ids:
            return set()
        params = {"stream_id": stream_id, "node_ids": list(node_ids)}
        return set(self.conn.execute(_present_in_stream, params).scalars())

    def stream_nodes(
        self,
        stream_id: int,
        *,
        lifecycles: Collection[LifecycleState] | None = None,
        scopes: Collection[Scope] | None = None,
        node_types: Collection[NodeType] | None = None,
        exclude_node_types: Collection[NodeType] | None = None,
        source_types: Collection[SourceType] | None = None,
        include_archived: bool = True,
        valid_at: datetime | None = None,
        occurred_since: datetime | None = None,
        occurred_until: datetime | None = None,
        after: tuple[datetime, uuid.UUID] | None = None,
        limit: int | None = None,
    ) -> list[NodeRow]:
        """The stream's nodes matching the filters, by (created_at, node_id);
        ``valid_at`` keeps nodes in effect then (see ``retrieval_index.NodeFilter``),
        ``occurred_since``/``until`` bound effective times (half-open); ``after``
        starts past that position, ``limit`` bounds the count."""
        query = sa.select(nodes).where(nodes.c.stream_id == stream_id)
        if not include_archived:
            query = query.where(nodes.c.archived_at.is_(None))
        if valid_at is not None:
            query = query.where(nodes.c.occurred_at <= valid_at, _holds_at(valid_at))
        if occurred_since is not None:
            query = query.where(nodes.c.occurred_at >= occurred_since)
        if occurred_until is not None:
            query = query.where(nodes.c.occurred_at < occurred_until)
        if after is not None:
            created_at, node_id = after
            query = query.where(
                sa.or_(
                    nodes.c.created_at > created_at,
                    sa.and_(nodes.c.created_at == created_at, nodes.c.node_id > node_id),
                )
            )
        for column, values in (
            (nodes.c.lifecycle, lifecycles),
            (nodes.c.scope, scopes),
            (nodes.c.node_type, node_types),
            (nodes.c.source_type, source_types),
        ):
            if values is not None:
                query = query.where(column.in_([v.value for v in values]))
        if exclude_node_types:
            query = query.where(nodes.c.node_type.not_in([v.value for v in exclude_node_types]))
        query = query.order_by(nodes.c.created_at, nodes.c.node_id)
        if limit is not None:
            query = query.limit(limit)
        return list(self.conn.execute(query))

    def update_state(self, row: NodeRow, state: Mapping[str, Any]) -> None:
        """Set the lifecycle columns of the node ``row`` (found by its key)."""
        values = {k: v for k, v in state.items() if k in STATE_COLUMNS}
        key = (nodes.c[c] == row._mapping[c] for c in ("stream_id", "event_id", "ordinal"))
        self.conn.execute(nodes.update().where(*key).values(**values))

    # -- edges ---------------------------------------------------------------

    def insert_edge(
        self,
        edge_id: uuid.UUID,
        stream_id: int,
        kind: str,
        source: uuid.UUID,
        target: uuid.UUID,
        event_id: uuid.UUID,
        created_at: datetime,
    ) -> None:
        self.conn.execute(
            edges.insert().values(
                edge_id=edge_id,
                stream_id=stream_id,
                kind=kind,
                source_node=source,
                target_node=target,
                event_id=event_id,
                created_at=created_at,
            )
        )

    def resolve_edges_touching(self, kind: str, node_id: uuid.UUID, resolved_at: datetime) -> None:
        """Mark every open edge of ``kind`` at ``node_id`` as resolved."""
        self.conn.execute(
            edges.update()
            .where(
                edges.c.kind == kind,
                sa.or_(edges.c.source_node == node_id, edges.c.target_node == node_id),
                edges.c.resolved_at.is_(None),
            )
            .values(resolved_at=resolved_at)
        )

    def resolve_edge(
        self, stream_id: int, kind: str, source: uuid.UUID, target: uuid.UUID, at: datetime
    ) -> None:
        """Mark the open edges of ``kind`` from ``source`` to ``target`` as resolved."""
        self.conn.execute(
            edges.update()
            .where(
                edges.c.stream_id == stream_id,
                edges.c.kind == kind,
                edges.c.source_node == source,
                edges.c.target_node == target,
                edges.c.resolved_at.is_(None),
            )
            .values(resolved_at=at)
        )

    def stream_edges(self, stream_id: int) -> list[sa.Row[Any]]:
        return self._stream_rows(edges, stream_id, edges.c.edge_id)

    # -- idempotency keys ----------------------------------------------------

    def record_operation(
        self, stream_id: int, key: str, fingerprint: bytes, event_id: uuid.UUID
    ) -> None:
        self.conn.execute(
            operations.insert().values(
                stream_id=stream_id, operation_key=key, fingerprint=fingerprint, event_id=event_id
            )
        )

    # -- erasure -------------------------------------------------------------

    def purge_stream(self, stream_id: int) -> None:
        """Every row of the stream; what is applied after a purge is complete, so the
        stream's backfill mark goes too."""
        for table in (nodes, edges, operations, memory_events, node_refs, graph_backfills):
            self.conn.execute(table.delete().where(table.c.stream_id == stream_id))

    def needs_rebuild(self, stream_id: int) -> bool:
        """Whether the stream's graph predates its dependency rows (migration pj0008)."""
        query = sa.select(graph_backfills.c.stream_id).where(
            graph_backfills.c.stream_id == stream_id
        )
        return self.conn.execute(query).first() is not None

    def marked_streams(self, after: int, limit: int) -> list[int]:
        """Up to ``limit`` streams marked for a rebuild (see :meth:`needs_rebuild`), by
        stream id from just after ``after``: a bulk backfill's next page."""
        query = (
            sa.select(graph_backfills.c.stream_id)
            .where(graph_backfills.c.stream_id > after)
            .order_by(graph_backfills.c.stream_id)
            .limit(limit)
        )
        return list(self.conn.execute(query).scalars())

    def count_marked(self) -> int:
        query = sa.select(sa.func.count()).select_from(graph_backfills)
        return int(self.conn.execute(query).scalar_one())

    # -- dependencies between events (what delete_event re-derives) --------------

    def add_refs(self, stream_id: int, event_id: uuid.UUID, node_ids: Iterable[uuid.UUID]) -> None:
        """Record that an event touched these nodes."""
        rows = [{"stream_id": stream_id, "event_id": event_id, "node_id": n} for n in set(node_ids)]
        if rows:
            self.conn.execute(node_refs.insert(), rows)

    def nodes_reached(self, stream_id: int, event_ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
        """The nodes these events derive or touched (two ranges of subject-first keys)."""
        derived = sa.select(nodes.c.node_id).where(
            nodes.c.stream_id == stream_id, nodes.c.event_id.in_(event_ids)
        )
        touched = sa.select(node_refs.c.node_id).where(
            node_refs.c.stream_id == stream_id, node_refs.c.event_id.in_(event_ids)
        )
        return set(self.conn.execute(sa.union(derived, touched)).scalars())

    def events_reaching(self, stream_id: int, node_ids: Collection[uuid.UUID]) -> set[uuid.UUID]:
        """The events that derive or touched these nodes.  The deriving events come from
        the node directory (memory_nodes has no index by node id); its entries outlive
        erasure, so erased events may be among them: they apply as nothing."""
        derived = sa.select(node_directory.c.event_id).where(
            node_directory.c.stream_id == stream_id, node_directory.c.node_id.in_(node_ids)
        )
        touched = sa.select(node_refs.c.event_id).where(
            node_refs.c.stream_id == stream_id, node_refs.c.node_id.in_(node_ids)
        )
        return set(self.conn.execute(sa.union(derived, touched)).scalars())

    def stream_refs(
        self, stream_id: int, event_ids: Collection[uuid.UUID] | None = None
    ) -> list[tuple[str, str]]:
        """A stream's dependency rows (of these events only, if given) as (event id,
        node id) text, for its state digest."""
        query = (
            sa.select(node_refs.c.event_id, node_refs.c.node_id)
            .where(node_refs.c.stream_id == stream_id)
            .order_by(node_refs.c.event_id, node_refs.c.node_id)
        )
        if event_ids is not None:
            query = query.where(node_refs.c.event_id.in_(list(event_ids)))
        return [(str(e), str(n)) for e, n in self.conn.execute(query)]

    def purge_part(
        self, stream_id: int, node_ids: Collection[uuid.UUID], event_ids: Collection[uuid.UUID]
    ) -> None:
        """The rows of these nodes and events, which nothing else depends on."""
        # Every node of the part is derived by one of its events (the part is closed),
        # so its nodes are one key range per event.
        by_stream = (
            (nodes, nodes.c.event_id.in_(event_ids)),
            (edges, sa.or_(edges.c.source_node.in_(node_ids), edges.c.target_node.in_(node_ids))),
            (operations, operations.c.event_id.in_(event_ids)),
            (memory_events, memory_events.c.event_id.in_(event_ids)),
            (node_refs, node_refs.c.event_id.in_(event_ids)),
        )
        for table, selected in by_stream:
            self.conn.execute(table.delete().where(table.c.stream_id == stream_id, selected))

    def part_rows(
        self, table: sa.Table, stream_id: int, event_ids: Collection[uuid.UUID] | None
    ) -> list[sa.Row[Any]]:
        """The stream's rows in ``table`` (nodes, edges, operations, source events) that
        these events wrote; all of them when ``event_ids`` is None.  One range of the
        subject-first key (or the stream's event index) per event: a part's rows cost
        what the part holds."""
        query = sa.select(table).where(table.c.stream_id == stream_id)
        if event_ids is not None:
            query = query.where(table.c.event_id.in_(list(event_ids)))
        return list(self.conn.execute(query))

    def time_spans(
        self, stream_id: int, event_ids: Collection[uuid.UUID] | None = None
    ) -> dict[str, datetime | None]:
        """When the stream's memories (or those of ``event_ids``) were recorded and when
        they took effect, as the bounds an erasure certificate states (none: ``None``)."""
        recorded = sa.select(
            sa.func.min(memory_events.c.recorded_at), sa.func.max(memory_events.c.recorded_at)
        ).where(memory_events.c.stream_id == stream_id)
        occurred = sa.select(
            sa.func.min(nodes.c.occurred_at), sa.func.max(nodes.c.occurred_at)
        ).where(nodes.c.stream_id == stream_id)
        if event_ids is not None:
            recorded = recorded.where(memory_events.c.event_id.in_(list(event_ids)))
            occurred = occurred.where(nodes.c.event_id.in_(list(event_ids)))
        # min and max keep their column's type: the bounds come back as UTC datetimes.
        recorded_from, recorded_to = self.conn.execute(recorded).one()
        occurred_from, occurred_to = self.conn.execute(occurred).one()
        return {
            "recorded_from": recorded_from,
            "recorded_to": recorded_to,
            "occurred_from": occurred_from,
            "occurred_to": occurred_to,
        }

    def _stream_rows(
        self, table: sa.Table, stream_id: int, key: sa.Column[Any]
    ) -> list[sa.Row[Any]]:
        """A stream's rows in ``table``, in the order of a unique ``key`` (digests compare them)."""
        query = sa.select(table).where(table.c.stream_id == stream_id).order_by(key)
        return list(self.conn.execute(query))


def _holds_at(moment: datetime) -> sa.ColumnElement[bool]:
    """Not retired by ``moment``.  A node retired before effective time existed has no
    ``valid_to`` until its graph is rebuilt: it counts as never in effect."""
    return sa.or_(
        nodes.c.valid_to > moment,
        sa.and_(nodes.c.valid_to.is_(None), nodes.c.lifecycle != LifecycleState.SUPERSEDED.value),
    )


def _directory_entry(node_row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: node_row[k] for k in ("stream_id", "node_id", "event_id", "ordinal")}


def _node_values(cipher: SubjectCipher, node: Node, ordinal: int) -> dict[str, Any]:
    """A node's row, its personal values sealed under the subject's key."""
    session = (
        None
        if node.session_id is None
        else cipher.seal("node.session", node.id.bytes, node.session_id.encode())
    )
    return {
        "node_id": node.id,
        "stream_id": cipher.stream_id,
        "event_id": node.event_id,
        "ordinal": ordinal,
        "node_type": node.node_type.value,
        "scope": node.scope.value,
        "source_type": node.source_type.value,
        "content": cipher.seal("node.content", node.id.bytes, node.content.encode()),
        "meta": seal_json(cipher, "node.meta", node.id, node.meta),
        "session_id": session,
        "created_at": node.created_at,
        "occurred_at": node.occurred_at,
        **state_of(node),
    }


def state_of(node: Node) -> dict[str, Any]:
    """The mutable part of a node, as stored in rows and journal snapshots."""
    return {
        "lifecycle": node.lifecycle.value,
        "superseded_by": node.superseded_by,
        "confidence_base": node.confidence_base,
        "salience_base": node.salience_base,
        "reinforcement_boost": node.reinforcement_boost,
        "reinforcement_count": node.reinforcement_count,
        "last_reinforced_at": node.last_reinforced_at,
        "updated_at": node.updated_at,
        "archived_at": node.archived_at,
        "valid_to": node.valid_to,
    }


def node_from_row(cipher: SubjectCipher, row: NodeRow) -> Node:
    """Decrypt a node row (see :meth:`GraphStore.add_stored`)."""
    session = (
        None
        if row.session_id is None
        else cipher.open("node.session", row.node_id.bytes, row.session_id).decode()
    )
    return Node(
        id=row.node_id,
        event_id=row.event_id,
        content=cipher.open("node.content", row.node_id.bytes, row.content).decode(),
        node_type=NodeType(row.node_type),
        scope=Scope(row.scope),
        source_type=SourceType(row.source_type),
        lifecycle=LifecycleState(row.lifecycle),
        confidence_base=row.confidence_base,
        salience_base=row.salience_base,
        reinforcement_boost=row.reinforcement_boost,
        reinforcement_count=row.reinforcement_count,
        created_at=row.created_at,
        updated_at=row.updated_at,
        occurred_at=row.occurred_at,
        last_reinforced_at=row.last_reinforced_at,
        superseded_by=row.superseded_by,
        session_id=session,
        meta=open_json(cipher, "node.meta", row.node_id, row.meta),
        archived_at=row.archived_at,
        valid_to=row.valid_to,
    )
