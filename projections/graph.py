"""The node graph projection (inline: applied in the appending transaction).

Memory events carry the outcome of each decision (after-states), so applying
them is bookkeeping, not judgement: commands in the application decide and
validate; this module records.  Nodes whose source event was erased are
simply absent on replay, and records that mention them only touch the nodes
that remain.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from typing import Any

from sqlalchemy.engine import Connection

from eventstore import RecordedEvent, SubjectCipher
from eventstore.batch import DerivedRows
from projections import events as ev
from projections.base import Anchored, Projection, StreamSource, StreamView, item_digest, replay
from projections.claims.records import claim_node, claim_row, entity_node
from projections.extraction import Extractor, OneNodePerEvent
from projections.model import (
    EdgeKind,
    LifecycleState,
    Node,
    NodeType,
    Scope,
    SourceType,
    new_node,
    node_labels,
)
from projections.parts import Part, reach
from projections.storage.claim_store import ClaimStore
from projections.storage.graph_queries import nodes_of_event
from projections.storage.graph_store import (
    GraphStore,
    NodeRow,
    StoredRows,
    node_from_row,
    state_of,
)
from projections.storage.graph_store import stored_rows as stored_graph_rows
from projections.storage.item_store import ItemStore, revision_row
from projections.storage.snapshot_store import SnapshotStore
from projections.storage.tables import edges, memory_events, operations
from projections.storage.tables import items as items_table
from projections.storage.tables import nodes as nodes_table


def state_to_json(state: Mapping[str, Any]) -> dict[str, Any]:
    """A node state (see ``state_of``) as JSON-safe values for journal snapshots."""
    return {
        k: (v.isoformat() if isinstance(v, datetime) else str(v) if isinstance(v, uuid.UUID) else v)
        for k, v in state.items()
    }


def state_from_json(raw: Mapping[str, Any]) -> dict[str, Any]:
    state = dict(raw)
    for key in ("last_reinforced_at", "updated_at", "archived_at", "valid_to"):
        if state.get(key) is not None:
            state[key] = datetime.fromisoformat(state[key])
    if state.get("superseded_by") is not None:
        state["superseded_by"] = uuid.UUID(state["superseded_by"])
    return state


def item_hash(cipher: SubjectCipher, key: str) -> bytes:
    """The keyed hash a caller's item key is found by (see ``memory_items``)."""
    return cipher.mac("item", key.encode())


def _item_revision(
    cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any], key: str, expires_at: Any
) -> dict[str, Any]:
    """The ``memory_items`` row of a stored event that is a revision of an item."""
    return revision_row(
        cipher.stream_id,
        item_hash(cipher, key),
        event.version,
        event.event_id,
        event.recorded_at,
        _optional_time(expires_at),
        ev.effective_at(data, event.recorded_at),
    )


def _optional_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def operation_fingerprint(cipher: SubjectCipher, key: str, request: Mapping[str, Any]) -> bytes:
    """Keyed hash of what an idempotency key was first used for."""
    text = json.dumps({"key": key, **request}, sort_keys=True, separators=(",", ":"))
    return cipher.mac("operation", text.encode())


class NodeGraphProjection(Projection):
    """Nodes, SUPERSEDES/CONTRADICTS edges, lifecycle and idempotency keys."""

    name = "node_graph"
    version = 1

    def __init__(self, extractor: Extractor | None = None) -> None:
        self.extractor = extractor or OneNodePerEvent()

    def apply(self, conn: Connection, cipher: SubjectCipher, event: RecordedEvent) -> None:
        if event.data is None:  # erased: nothing left to derive
            return
        store = GraphStore(conn)
        handler = {
            ev.STORED: self._stored,
            ev.SUPERSEDED: self._retired,
            ev.CONTRADICTED: self._contradicted,
            ev.CONTRADICTION_RESOLVED: self._retired,
            ev.REINFORCED: self._reinforced,
            ev.ARCHIVED: self._archived,
            ev.UNARCHIVED: self._archived,
            ev.CLAIMS_EXTRACTED: self._claims_extracted,
            ev.ITEM_EXPIRY: self._item_expiry,
            ev.LIKELY_UPDATE: self._likely_update,
            ev.LIKELY_UPDATE_REJECTED: self._likely_update_rejected,
        }.get(event.type)
        if handler is not None:
            handler(store, cipher, event, event.data)
        if event.type != ev.STORED:  # a stored event's nodes name it already
            store.add_refs(cipher.stream_id, event.event_id, _touched(store, cipher, event))

    def apply_page(
        self, conn: Connection, page: Sequence[tuple[SubjectCipher, RecordedEvent]]
    ) -> None:
        for cipher, event in page:
            self.apply(conn, cipher, event)

    def purge(self, conn: Connection, stream_id: int) -> None:
        GraphStore(conn).purge_stream(stream_id)
        ClaimStore(conn).purge_stream(stream_id)
        ItemStore(conn).purge_stream(stream_id)

    def needs_rebuild(self, conn: Connection, stream_id: int) -> bool:
        """Whether the stream's graph predates the rows :meth:`remove_events` follows."""
        return GraphStore(conn).needs_rebuild(stream_id)

    def remove_events(
        self,
        conn: Connection,
        cipher: SubjectCipher,
        erased: Collection[uuid.UUID],
        read: Callable[[list[uuid.UUID]], list[RecordedEvent]],
    ) -> Part:
        """Make the graph what a replay of the stream without ``erased`` gives; the part
        re-derived.

        The part of the graph the erased events reach (the nodes they derive or
        touched, the events that derive or touched those nodes, their nodes, and
        so on: ``projections.parts.reach``) is purged, and its remaining events,
        read with ``read``, are applied again in stream order.  Handlers read and
        write only the nodes their event names, so nothing outside that part
        depends on what is inside: its cost grows with what the erased events
        reached, not with the stream.
        """
        part = reach(conn, cipher.stream_id, erased)
        self._rederive(conn, cipher, part, read)
        return part

    def _rederive(
        self,
        conn: Connection,
        cipher: SubjectCipher,
        part: Part,
        read: Callable[[list[uuid.UUID]], list[RecordedEvent]],
    ) -> None:
        stream_id = cipher.stream_id
        GraphStore(conn).purge_part(stream_id, part.nodes, part.events)
        ClaimStore(conn).purge_nodes(stream_id, part.nodes)
        ItemStore(conn).purge_events(stream_id, part.events)
        remaining = sorted(
            (e for e in read(sorted(part.events)) if e.data is not None), key=lambda e: e.version
        )
        for event in remaining:
            self.apply(conn, cipher, event)

    def replay_part(self, source: StreamSource, stream_id: int, part: Part) -> bool:
        cipher = source.cipher(stream_id)
        if cipher is None:
            return False
        self._rederive(source.connection, cipher, part, source.get_events)
        return True

    def snapshot_basis(self, conn: Connection, stream_id: int) -> str:
        return type(self.extractor).__qualname__

    def time_spans(
        self, conn: Connection, stream_id: int, event_ids: Collection[uuid.UUID] | None = None
    ) -> dict[str, datetime | None]:
        return GraphStore(conn).time_spans(stream_id, event_ids)

    def purge_events(
        self, source: StreamSource, stream_id: int, erased: Sequence[RecordedEvent]
    ) -> None:
        """Re-derive only what the erased events reached, unless the stream's graph
        predates the rows that say what that is (then replay it, once), and record
        which part that was for the proof that follows (projections.proofs)."""
        conn, cipher = source.connection, source.cipher(stream_id)
        if cipher is None:
            replay(source, [self], stream_id)
            return
        snapshots = SnapshotStore(conn, cipher)
        if self.needs_rebuild(conn, stream_id):
            replay(source, [self], stream_id)
            snapshots.add_part(None, ())
            return
        part = self.remove_events(conn, cipher, [e.event_id for e in erased], source.get_events)
        snapshots.add_part(part.events, part.nodes)

    def anchored_digests(
        self, view: StreamView, stream_id: int, part: Part | None = None
    ) -> list[Anchored]:
        """Nodes, edges, idempotency keys, source events and dependency rows are placed by
        the event that wrote them, claims by their node (see ``projections.parts``)."""
        conn, cipher = view.connection, view.cipher(stream_id)
        store = GraphStore(conn)
        events = None if part is None else part.events
        node_rows = store.part_rows(nodes_table, stream_id, events)
        if cipher is None and node_rows:
            raise ValueError("node rows remain for a stream whose key is destroyed")
        anchored: list[Anchored] = [
            (r.event_id, item_digest("node", _node_state(node_from_row(cipher, r))))
            for r in node_rows
            if cipher
        ]
        for kind, table in (("edge", edges), ("operation", operations), ("event", memory_events)):
            anchored += [
                (r.event_id, item_digest(kind, _row_dict(r)))
                for r in store.part_rows(table, stream_id, events)
            ]
        claims = ClaimStore(conn).stream_claims(stream_id, None if part is None else part.nodes)
        anchored += [(r.node_id, item_digest("claim", _row_dict(r))) for r in claims]
        anchored += [
            (row["event_id"], item_digest("item", row))
            for row in ItemStore(conn).stream_rows(stream_id, events)
        ]
        anchored += [
            (uuid.UUID(ref[0]), item_digest("ref", ref))
            for ref in store.stream_refs(stream_id, events)
        ]
        return anchored

    # -- handlers --------------------------------------------------------------

    def node_ids(self, event: RecordedEvent) -> list[uuid.UUID]:
        """The ids of the nodes a stored event derives: a function of the event
        alone (extraction is deterministic), so no query is needed."""
        if event.data is None:  # erased: derives nothing
            return []
        drafts = self.extractor.extract(event.data["content"], NodeType(event.data["node_type"]))
        return [ev.node_id(event.event_id, ordinal) for ordinal in range(len(drafts))]

    def apply_stored(
        self, conn: Connection, cipher: SubjectCipher, stored: Sequence[RecordedEvent]
    ) -> list[list[uuid.UUID]]:
        """:meth:`apply` for stored events of one stream, in order; each one's node ids."""
        derived, node_ids = self.stored_rows(cipher, stored)
        GraphStore(conn).add_rows(derived)
        return node_ids

    def stored_rows(
        self, cipher: SubjectCipher, stored: Sequence[RecordedEvent]
    ) -> tuple[list[DerivedRows], list[list[uuid.UUID]]]:
        """The rows stored events of one stream derive, in order, and each one's node
        ids; reads nothing, so an append can write them itself (``EventStore.append_each``).

        The rows of all of them are one part per table, and the extractor runs once
        per event: the nodes it drafts are both written and named.
        """
        if any(event.type != ev.STORED for event in stored):
            raise ValueError("not a stored event")
        rows: list[StoredRows] = []
        revisions = []
        for event in stored:
            if event.data is None:  # erased: nothing left to derive
                continue
            scope, new_nodes = self._stored_nodes(event, event.data)
            rows.append((event.event_id, scope, event.recorded_at, new_nodes))
            item = ev.item_of(event.data)
            if item is not None:
                revisions.append(_item_revision(cipher, event, event.data, *item))
        derived = stored_graph_rows(cipher, rows) if rows else []
        if revisions:
            derived.append(DerivedRows(items_table, revisions))
        nodes_of = {event_id: [node.id for node in new_nodes] for event_id, *_, new_nodes in rows}
        return derived, [nodes_of.get(event.event_id, []) for event in stored]

    def _stored(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        self.apply_stored(store.conn, cipher, [event])

    def _item_expiry(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        expires_at = _optional_time(data["expires_at"])
        ItemStore(store.conn).move_expiry(cipher.stream_id, uuid.UUID(data["event_id"]), expires_at)

    def _stored_nodes(self, event: RecordedEvent, data: dict[str, Any]) -> tuple[Scope, list[Node]]:
        """The scope and the new nodes of a stored event (ids derive from the event id)."""
        event_id, recorded_at = event.event_id, event.recorded_at
        occurred_at = ev.effective_at(data, recorded_at)
        scope = Scope(data["scope"])
        drafts = self.extractor.extract(data["content"], NodeType(data["node_type"]))
        new_nodes = [
            new_node(
                id=ev.node_id(event_id, ordinal),
                event_id=event_id,
                content=draft.content,
                node_type=draft.node_type,
                scope=scope,
                source_type=SourceType(data["source_type"]),
                created_at=recorded_at,
                occurred_at=occurred_at,
                session_id=data.get("session_id"),
                meta=data.get("meta") or {},
            )
            for ordinal, draft in enumerate(drafts)
        ]
        return scope, new_nodes

    def _contradicted(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        a, b = (uuid.UUID(i) for i in data["node_ids"])
        if {a, b} <= self._apply_after_states(store, cipher, data):
            _link(store, cipher, event, EdgeKind.CONTRADICTS, a, b)
        self._record_operation(store, cipher, event, data)

    def _reinforced(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        self._apply_after_states(store, cipher, data)
        if data.get("request_id"):
            self._record_operation(store, cipher, event, data)

    def _archived(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        """The archiving job's decision (archived or un-archived), recorded as
        after-states: replay never re-decides."""
        self._apply_after_states(store, cipher, data)

    def _claims_extracted(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        """A message's saved plan: its claim nodes, then the retirements it decided.

        Each retirement is applied exactly as an explicit supersede is (which
        closes the retired claim's interval too).  No check that the message still
        stands: erasing a message erases its claims event in the same request
        (``projections.events.derived_event_ids``), and the worker appends one
        only under the stream's lock after checking the message.
        """
        records = data["claims"]
        store.add_claim_nodes(
            cipher,
            [(c["ordinal"], claim_node(data, c)) for c in records],
            [claim_row(cipher, event.event_id, data, c) for c in records],
        )
        # An identity's ENTITY node comes with the first live message naming it:
        # later ones find it; after an erasure, replay re-creates it with the
        # first message that remains (older claims events name no entities).
        entities = data.get("entities") or []
        present = store.present_nodes(cipher.stream_id, [uuid.UUID(e["node_id"]) for e in entities])
        store.add_entity_nodes(
            cipher,
            [
                (e["ordinal"], entity_node(data, e))
                for e in entities
                if uuid.UUID(e["node_id"]) not in present
            ],
        )
        for retirement in data["retirements"]:
            self._retired(store, cipher, event, retirement)

    def _likely_update(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        """The detector's decision: an open LIKELY_UPDATES edge from the newer memory to
        the older, while both exist (an erased successor reinstates its predecessor,
        as for a retirement: docs/erasure.md)."""
        new, old = uuid.UUID(data["new_node_id"]), uuid.UUID(data["old_node_id"])
        if store.present_nodes(cipher.stream_id, [old, new]) == {old, new}:
            _link(store, cipher, event, EdgeKind.LIKELY_UPDATES, new, old)

    def _likely_update_rejected(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        """Both memories stand again: the decision's edge is resolved."""
        new, old = uuid.UUID(data["new_node_id"]), uuid.UUID(data["old_node_id"])
        store.resolve_edge(cipher.stream_id, EdgeKind.LIKELY_UPDATES, new, old, event.recorded_at)

    # -- shared steps ------------------------------------------------------------

    def _retired(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        """One node retires another: a supersession (explicit, or a claim's automatic
        one), or the resolution of a contradiction."""
        retired, successor = _retirement(data)
        after = _after_states(data)
        rows = store.node_rows(after)
        _fill_valid_to(after, retired, successor, rows, data)
        # The successor is among the recorded after-states: its row answers, no query.
        named = {row.node_id for row in rows}
        if successor not in named and not store.present_nodes(cipher.stream_id, [successor]):
            # An erased successor reinstates its predecessor: a retirement whose
            # successor no longer exists retires nothing, so an erasure leaves
            # what a replay without the erased events gives (docs/erasure.md).
            self._record_operation(store, cipher, event, data)
            _rechain_item(store, cipher, event, retired)
            return
        present = self._set_states(store, cipher, rows, after)
        if retired not in present:
            _rechain_item(store, cipher, event, successor)
        # A retired node's contradictions are settled with it.
        store.resolve_edges_touching(EdgeKind.CONTRADICTS, retired, event.recorded_at)
        _close_interval(store, cipher, retired, data)
        if {retired, successor} <= present:
            _link(store, cipher, event, EdgeKind.SUPERSEDES, successor, retired)
        # A value stored into its history takes the place of its successor before
        # the values that successor had ended (oblivio.memory.commands.backdated_locked).
        for earlier in (uuid.UUID(n) for n in data.get("repointed") or ()):
            if {retired, earlier} <= present:
                store.resolve_edge(
                    cipher.stream_id, EdgeKind.SUPERSEDES, successor, earlier, event.recorded_at
                )
                _link(store, cipher, event, EdgeKind.SUPERSEDES, retired, earlier)
        self._record_operation(store, cipher, event, data)

    def _apply_after_states(
        self, store: GraphStore, cipher: SubjectCipher, data: dict[str, Any]
    ) -> set[uuid.UUID]:
        """Set each recorded after-state on nodes that still exist; return those nodes."""
        after = _after_states(data)
        return self._set_states(store, cipher, store.node_rows(after), after)

    def _set_states(
        self,
        store: GraphStore,
        cipher: SubjectCipher,
        rows: Sequence[NodeRow],
        after: Mapping[uuid.UUID, dict[str, Any]],
    ) -> set[uuid.UUID]:
        """Set the after-states on the nodes of ``rows``; return those nodes.

        A state that names a successor which no longer exists keeps the node's
        own lifecycle: the retirement it records was not applied (see ``_retired``).
        """
        named = {s["superseded_by"] for s in after.values() if s.get("superseded_by")}
        missing = named - {row.node_id for row in rows}
        gone = missing - store.present_nodes(cipher.stream_id, missing)
        for row in rows:
            state = after[row.node_id]
            if state.get("superseded_by") in gone:
                kept = ("lifecycle", "superseded_by", "valid_to")
                state = state | {k: row._mapping[k] for k in kept}
            store.update_state(row, state)
        return {row.node_id for row in rows}

    def _record_operation(
        self, store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, data: dict[str, Any]
    ) -> None:
        key, request = data["operation_key"], data["request"]
        fingerprint = operation_fingerprint(cipher, key, request)
        store.record_operation(cipher.stream_id, key, fingerprint, event.event_id)


def _after_states(data: Mapping[str, Any]) -> dict[uuid.UUID, dict[str, Any]]:
    """A record's after-states by node id."""
    return {uuid.UUID(k): state_from_json(v) for k, v in data["after"].items()}


def _fill_valid_to(
    after: dict[uuid.UUID, dict[str, Any]],
    retired: uuid.UUID,
    successor: uuid.UUID,
    rows: Sequence[NodeRow],
    data: Mapping[str, Any],
) -> None:
    """Records older than effective time (0.x) name no ``valid_to`` in the retired
    node's after-state: derive it as a new record states it (the claim interval's end
    the record names, else the successor's effective time, never before the node's own).
    """
    state = after.get(retired)
    if state is None or "valid_to" in state:
        return
    by_id = {row.node_id: row for row in rows}
    own, new = by_id.get(retired), by_id.get(successor)
    if own is None or new is None:
        return
    named = data.get("valid_to")
    end = datetime.fromisoformat(named) if named else new.occurred_at
    state["valid_to"] = max(end, own.occurred_at)


def _rechain_item(
    store: GraphStore, cipher: SubjectCipher, event: RecordedEvent, node_id: uuid.UUID
) -> None:
    """An item keeps one current value when one of its revisions was erased.

    ``event`` retired a revision of the item ``node_id`` belongs to, or was
    retired by one, and the other side of it no longer exists.  Each remaining
    revision still active but the last in effect is ended by the next one, as
    storing the remaining revisions in that order would have ended it; a node
    that is no revision, and revisions already retired, are left as they are.
    """
    rows = store.node_rows([node_id])
    items = ItemStore(store.conn)
    item = items.item_of(cipher.stream_id, rows[0].event_id) if rows else None
    if item is None:
        return
    in_order = (
        nodes_of_event(store.conn, r.event_id) for r in items.revisions(cipher.stream_id, item)
    )
    revisions = [nodes for nodes in in_order if nodes]  # a revision whose nodes are gone ends none
    for earlier, later in pairwise(revisions):
        successor = later[0]
        for retired in earlier:
            if retired.lifecycle == LifecycleState.ACTIVE.value:
                _end_revision(store, cipher, event, retired, successor)


def _end_revision(
    store: GraphStore,
    cipher: SubjectCipher,
    event: RecordedEvent,
    retired: NodeRow,
    successor: NodeRow,
) -> None:
    """``successor`` retires ``retired`` as a put of the item would have."""
    valid_to = max(successor.occurred_at, retired.occurred_at)
    state = {
        "lifecycle": LifecycleState.SUPERSEDED.value,
        "superseded_by": successor.node_id,
        "updated_at": event.recorded_at,
        "valid_to": valid_to,
    }
    store.update_state(retired, state)
    store.resolve_edges_touching(EdgeKind.CONTRADICTS, retired.node_id, event.recorded_at)
    ClaimStore(store.conn).close_interval(cipher.stream_id, retired.node_id, valid_to)
    _link(store, cipher, event, EdgeKind.SUPERSEDES, successor.node_id, retired.node_id)


def _retirement(data: Mapping[str, Any]) -> tuple[uuid.UUID, uuid.UUID]:
    """The retired node and its successor, as a supersession or a resolution names them."""
    if "loser_node_id" in data:
        return uuid.UUID(data["loser_node_id"]), uuid.UUID(data["winner_node_id"])
    return uuid.UUID(data["old_node_id"]), uuid.UUID(data["new_node_id"])


def _link(
    store: GraphStore,
    cipher: SubjectCipher,
    event: RecordedEvent,
    kind: EdgeKind,
    source: uuid.UUID,
    target: uuid.UUID,
) -> None:
    """The edge ``event`` draws from ``source`` to ``target`` (its id a function of all four)."""
    store.insert_edge(
        ev.edge_id(kind, source, target, event.event_id),
        cipher.stream_id,
        kind,
        source,
        target,
        event.event_id,
        event.recorded_at,
    )


def _close_interval(
    store: GraphStore, cipher: SubjectCipher, retired: uuid.UUID, data: Mapping[str, Any]
) -> None:
    """Close a retired claim's validity interval where its record says.

    Explicit and automatic retirements record ``valid_to`` alike when the
    retired node is a claim; records of other nodes (and older records) have none.
    """
    if data.get("valid_to") is not None:
        valid_to = datetime.fromisoformat(data["valid_to"])
        ClaimStore(store.conn).close_interval(cipher.stream_id, retired, valid_to)


def _touched(store: GraphStore, cipher: SubjectCipher, event: RecordedEvent) -> set[uuid.UUID]:
    """The nodes an event other than memory.stored names (see ``memory_node_refs``)."""
    data = event.data or {}
    if event.type == ev.ITEM_EXPIRY:  # the revision's nodes
        return store.nodes_reached(cipher.stream_id, [uuid.UUID(data["event_id"])])
    if event.type == ev.CLAIMS_EXTRACTED:
        named = [*data["claims"], *(data.get("entities") or [])]
        ids = {uuid.UUID(n["node_id"]) for n in named}
        for retirement in data["retirements"]:
            ids |= _named_nodes(retirement)
        return ids
    return _named_nodes(data)


def _named_nodes(data: Mapping[str, Any]) -> set[uuid.UUID]:
    """The nodes a command's record names: its after-states and the nodes it links."""
    ids = {uuid.UUID(k) for k in data.get("after") or {}}
    single = ("old_node_id", "new_node_id", "winner_node_id", "loser_node_id")
    ids |= {uuid.UUID(data[k]) for k in single if data.get(k)}
    return ids | {uuid.UUID(n) for n in data.get("node_ids") or ()}


def _node_state(node: Node) -> dict[str, Any]:
    fixed = {
        "session_id": node.session_id,
        "meta": node.meta,
        "created_at": node.created_at,
        "occurred_at": node.occurred_at,
    }
    return node_labels(node) | fixed | state_of(node)


def _row_dict(row: Any) -> dict[str, Any]:
    return dict(row._mapping)
