"""Commands: validate against current state, append one journal event, project it inline.

Each command runs in one transaction: lock the owner's stream, read and check
the state, append the event that records the decision (with before/after
snapshots and a checksum), and apply it to the node graph.  Either all of
that commits or nothing does.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ParamSpec

from eventstore import (
    LockedStream,
    NewEvent,
    RecordedEvent,
    StreamRef,
    Subject,
    SubjectCipher,
    Transaction,
)
from eventstore.errors import (
    DuplicateEventError,
    InvalidInputError,
    NotFoundError,
)
from eventstore.ids import parse_uuid
from oblivio.errors import IdempotencyConflictError, LifecycleConflictError, NodeUnavailableError
from oblivio.memory import inputs, queries
from oblivio.memory.context import MemoryContext
from oblivio.memory.ownership import check_evidence, earlier_operation, lock_owner
from oblivio.memory.records import Correction, StoredMemory
from projections import events as ev
from projections.claims.records import effective_at
from projections.graph import state_to_json
from projections.model import (
    CONFIDENCE_CAP,
    CONFIDENCE_STEP,
    REINFORCEMENT_CAP,
    REINFORCEMENT_STEP,
    LifecycleState,
    Node,
    NodeType,
    Role,
    Scope,
    SourceType,
)
from projections.reads import GraphReads, NodeRow, node_from_row, state_of
from projections.scoring import MAX_TRIGGER_WEIGHT

P = ParamSpec("P")
CorrectionEntry = Mapping[str, Any] | Sequence[Any]


def _cipher(tx: Transaction, stream: LockedStream) -> SubjectCipher:
    """The owner's cipher, from the data key read (and unwrapped) with the stream's lock."""
    return tx.locked_cipher(stream)


def append_projected(
    ctx: MemoryContext, tx: Transaction, stream: LockedStream, event: NewEvent
) -> tuple[RecordedEvent, bool]:
    """Append and project; the flag is True when the append replayed an earlier one."""
    version_before = stream.version
    [recorded] = tx.append_locked(stream, [event])
    fresh = stream.version != version_before
    if fresh:
        ctx.graph.apply(tx.connection, _cipher(tx, stream), recorded)
    return recorded, not fresh


def _journal(
    key: str | None,
    request: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
    **fields: Any,
) -> dict[str, Any]:
    return ev.with_checksum(
        {
            "operation_key": key,
            "request": request,
            "before": before,
            "after": after,
            **fields,
        }
    )


def _snapshot(nodes: Sequence[Node]) -> dict[str, Any]:
    return {str(n.id): state_to_json(state_of(n)) for n in nodes}


def _nodes(tx: Transaction, stream: LockedStream, rows: Sequence[NodeRow]) -> list[Node]:
    cipher = _cipher(tx, stream)
    return [node_from_row(cipher, row) for row in rows]


# -- store ------------------------------------------------------------------------------


def stored_data(
    ctx: MemoryContext,
    content: str | bytes,
    *,
    user: str,
    scope: Scope | str,
    role: Role | str,
    session_id: str | None,
    source_type: SourceType | str,
    node_type: NodeType | str,
    meta: Mapping[str, Any] | None,
    occurred_at: datetime | str | None = None,
) -> dict[str, Any]:
    """The validated payload of a memory.stored event (``put_item`` adds its item).

    ``occurred_at`` (when the statement took effect) is in the payload only when
    given: without it the effective time is the log's recorded time.
    """
    effective = inputs.optional_moment(occurred_at, "occurred_at")
    data = {
        "user_id": user,
        "content": inputs.content(content),
        "scope": inputs.choice(Scope, scope, "scope").value,
        "role": inputs.choice(Role, role, "role").value,
        "session_id": inputs.optional_text(session_id, "session_id", inputs.MAX_SESSION_ID_CHARS),
        "source_type": inputs.choice(SourceType, source_type, "source_type").value,
        "node_type": inputs.choice(NodeType, node_type, "node_type").value,
        "meta": inputs.merged_meta(ctx.default_meta, meta),
    }
    if effective is not None:
        data["occurred_at"] = effective.isoformat()
    return data


def store_memory(
    ctx: MemoryContext,
    content: str | bytes,
    *,
    user_id: str,
    scope: Scope | str = Scope.PERSONAL,
    role: Role | str = Role.USER,
    session_id: str | None = None,
    source_type: SourceType | str = SourceType.USER_STATED,
    node_type: NodeType | str = NodeType.FACT,
    meta: Mapping[str, Any] | None = None,
    request_id: uuid.UUID | str | None = None,
    occurred_at: datetime | str | None = None,
) -> StoredMemory:
    """Append a memory event and derive its node(s); the event id and the node ids.

    ``occurred_at`` is when the statement took effect (timezone-aware; default:
    when it is stored); the log keeps its own recorded time beside it.
    """
    user = inputs.user(user_id)
    data = stored_data(
        ctx,
        content,
        user=user,
        scope=scope,
        role=role,
        session_id=session_id,
        source_type=source_type,
        node_type=node_type,
        meta=meta,
        occurred_at=occurred_at,
    )
    [(recorded, node_ids)] = append_memories(ctx, user, [(data, inputs.request_id(request_id))])
    return StoredMemory(recorded.event_id, node_ids)


def append_memories(
    ctx: MemoryContext, user: str, memories: Sequence[tuple[dict[str, Any], uuid.UUID | None]]
) -> list[tuple[RecordedEvent, tuple[uuid.UUID, ...]]]:
    """The one write of stored memories (``store``, ``store_many``, ``ingest``): the
    validated payloads of one owner, each with its request id, in one append with
    their graph rows (see ``EventStore.append_each``: one wait on PostgreSQL at the
    head this process remembers, the stream's lock only when that head moved); each
    event with its node ids.

    A request id makes its memory idempotent on its own: one that was stored
    already is not appended again and answers with its earlier nodes, as they are now.
    """

    def events_of(stream: StreamRef) -> list[NewEvent]:
        return [
            NewEvent(
                ev.STORED,
                data,
                # Without a request id the log draws a fresh id, and skips the
                # lookup of an earlier append that only a caller-chosen id can
                # need.  Scoped to the stream generation: after a forget, the
                # subject starts afresh and may reuse its keys.
                event_id=None
                if request is None
                else ev.operation_id("store", stream.stream_id, request),
            )
            for data, request in memories
        ]

    try:
        appended, node_ids = ctx.store.append_each(
            Subject(ctx.namespace, user), events_of, ctx.graph.stored_rows
        )
    except DuplicateEventError as e:
        raise IdempotencyConflictError() from e
    derived = iter(node_ids or ())
    replayed = [recorded.event_id for recorded, replay in appended if replay]
    earlier = _nodes_of_events(ctx, replayed) if replayed else {}
    return [
        # A replay: the earlier nodes, as they are now.
        (recorded, earlier.get(recorded.event_id, ()) if replay else tuple(next(derived)))
        for recorded, replay in appended
    ]


def _nodes_of_events(
    ctx: MemoryContext, event_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, tuple[uuid.UUID, ...]]:
    """The node ids each of ``event_ids`` has now."""
    with ctx.store.reading(snapshot=False) as view:
        graph = GraphReads(view)
        return {
            event_id: tuple(row.node_id for row in graph.nodes_of_event(event_id))
            for event_id in event_ids
        }


#: The keys a memory of ``store_many`` may hold: ``content`` and ``store``'s options.
MEMORY_KEYS = frozenset(
    {
        "content",
        "scope",
        "role",
        "session_id",
        "source_type",
        "node_type",
        "meta",
        "request_id",
        "occurred_at",
    }
)


def store_many(
    ctx: MemoryContext, memories: Sequence[Mapping[str, Any]], *, user_id: str
) -> list[StoredMemory]:
    """Store several memories of one owner atomically: all of them, or none.

    Each memory is a dictionary with ``content`` and, optionally, the other
    arguments of :func:`store` (``scope``, ``occurred_at``, ``meta``,
    ``request_id``, …), which apply to that memory alone.  Every memory is
    validated before anything is written; one invalid memory writes nothing.
    A memory with a ``request_id`` stored before answers with its earlier nodes.
    Up to ``inputs.MAX_BATCH_MEMORIES`` memories per call.
    """
    user = inputs.user(user_id)
    if isinstance(memories, str | bytes | Mapping) or not isinstance(memories, Sequence):
        raise InvalidInputError("memories must be a list of memory dictionaries")
    if not 1 <= len(memories) <= inputs.MAX_BATCH_MEMORIES:
        raise InvalidInputError(f"a batch holds 1 to {inputs.MAX_BATCH_MEMORIES} memories")
    parsed = []
    for n, memory in enumerate(memories):
        try:
            parsed.append(check_memory(ctx, user, memory))
        except InvalidInputError as e:
            raise type(e)(f"memory {n}: {e}") from e
    return [StoredMemory(e.event_id, ids) for e, ids in append_memories(ctx, user, parsed)]


def check_memory(
    ctx: MemoryContext, user: str, memory: Mapping[str, Any]
) -> tuple[dict[str, Any], uuid.UUID | None]:
    """One memory of a batch, validated as ``store`` validates its arguments: the
    payload of its event, and its request id."""
    if not isinstance(memory, Mapping):
        raise InvalidInputError("a memory must be a dictionary")
    unknown = set(memory) - MEMORY_KEYS
    if unknown:
        raise InvalidInputError(f"unknown fields: {', '.join(sorted(map(str, unknown)))}")
    data = stored_data(
        ctx,
        memory.get("content"),  # type: ignore[arg-type]  # checked there
        user=user,
        scope=memory.get("scope", Scope.PERSONAL),
        role=memory.get("role", Role.USER),
        session_id=memory.get("session_id"),
        source_type=memory.get("source_type", SourceType.USER_STATED),
        node_type=memory.get("node_type", NodeType.FACT),
        meta=memory.get("meta"),
        occurred_at=memory.get("occurred_at"),
    )
    return data, inputs.request_id(memory.get("request_id"))


def _answering_event_id(
    operation: Callable[P, StoredMemory], name: str, doc: str
) -> Callable[P, uuid.UUID]:
    """``operation`` (its parameters and their defaults) answering with the stored
    event's id alone."""

    @functools.wraps(operation)
    def event_id(*args: P.args, **kwargs: P.kwargs) -> uuid.UUID:
        return operation(*args, **kwargs).event_id

    event_id.__name__ = event_id.__qualname__ = name
    event_id.__doc__ = doc
    return event_id


store = _answering_event_id(
    store_memory,
    "store",
    """Append a memory event and derive its node(s); returns the event id.

    ``occurred_at``: when the statement took effect (default: when it is stored).
    """,
)


# -- supersede --------------------------------------------------------------------------


def supersede(
    ctx: MemoryContext,
    old_node_id: uuid.UUID | str,
    new_node_id: uuid.UUID | str,
    *,
    evidence_id: uuid.UUID | str | None = None,
    user_id: str | None = None,
    actor_id: str | None = None,
) -> Correction:
    """Retire ``old_node_id`` in favour of ``new_node_id`` (same owner and scope)."""
    [result] = supersede_many(
        ctx, [(old_node_id, new_node_id, evidence_id)], user_id=user_id, actor_id=actor_id
    )
    return result


def supersede_many(
    ctx: MemoryContext,
    corrections: Sequence[CorrectionEntry],
    *,
    user_id: str | None = None,
    actor_id: str | None = None,
) -> list[Correction]:
    """Several supersessions in one transaction: one invalid entry aborts them all."""
    entries = [_correction_entry(c) for c in corrections]
    if not entries:
        raise InvalidInputError("no corrections given")
    user = None if user_id is None else inputs.user(user_id)
    actor = inputs.optional_text(actor_id, "actor_id", inputs.MAX_ACTOR_ID_CHARS)
    with ctx.store.transaction() as tx:
        return [
            supersede_locked(ctx, tx, old, new, evidence, user, actor)
            for old, new, evidence in entries
        ]


def _correction_entry(entry: CorrectionEntry) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID | None]:
    if isinstance(entry, Mapping):
        old, new, evidence = (
            entry.get("old_node_id"),
            entry.get("new_node_id"),
            entry.get("evidence_id"),
        )
    elif len(entry) in (2, 3):
        old, new, evidence = (*entry, None)[:3]
    else:
        raise InvalidInputError("a correction is (old_node_id, new_node_id[, evidence_id])")
    return inputs.node_id(old), inputs.node_id(new), inputs.evidence_id(evidence)


# -- corrections between two nodes --------------------------------------------------------


def _pair_inputs(
    first: uuid.UUID | str,
    second: uuid.UUID | str,
    evidence_id: uuid.UUID | str | None,
    user_id: str | None,
    actor_id: str | None,
) -> tuple[tuple[uuid.UUID, uuid.UUID], uuid.UUID | None, str | None, str | None]:
    """A correction's arguments, checked: its two nodes, evidence, owner and actor."""
    return (
        (inputs.node_id(first), inputs.node_id(second)),
        inputs.evidence_id(evidence_id),
        None if user_id is None else inputs.user(user_id),
        inputs.optional_text(actor_id, "actor_id", inputs.MAX_ACTOR_ID_CHARS),
    )


@dataclass(frozen=True)
class _PairCorrection:
    """A correction between two nodes (supersede, contradict, resolve) as its journal
    keys it: an operation id derived from the nodes, an idempotency key, and the
    request that key fingerprints."""

    kind: str
    nodes: tuple[uuid.UUID, uuid.UUID]
    evidence: uuid.UUID | None
    actor: str | None
    request: dict[str, Any]
    operation: uuid.UUID

    @classmethod
    def of(
        cls,
        kind: str,
        nodes: tuple[uuid.UUID, uuid.UUID],
        evidence: uuid.UUID | None,
        actor: str | None,
        *,
        either_way: bool,
        **named: Any,
    ) -> _PairCorrection:
        """``either_way``: the same operation whichever node comes first (a pair)."""
        ids = sorted(nodes) if either_way else list(nodes)
        request = {**named, "evidence_id": _text(evidence), "actor_id": actor}
        return cls(kind, nodes, evidence, actor, request, ev.operation_id(kind, *ids))

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.operation}"

    def open(
        self, ctx: MemoryContext, tx: Transaction, user: str | None
    ) -> tuple[LockedStream, list[NodeRow]] | Correction:
        """Lock the nodes' owner and read them; the earlier correction if this one was
        made before (a replay), after which nothing is written; the evidence checked."""
        stream, rows = lock_owner(ctx, tx, list(self.nodes), user)
        earlier = earlier_operation(tx, _cipher(tx, stream), self.key, self.request)
        if earlier is not None:
            return Correction(self.operation, earlier, self.nodes, self.evidence, replayed=True)
        check_evidence(tx, self.evidence, stream.ref.stream_id, rows[0].scope)
        return stream, rows

    def record(
        self,
        ctx: MemoryContext,
        tx: Transaction,
        stream: LockedStream,
        event_type: str,
        states: tuple[Sequence[Node], Sequence[Node]],
        **fields: Any,
    ) -> Correction:
        """Append the correction's event: the nodes' states before and after, and
        ``fields`` beside the evidence and actor."""
        before, after = states
        data = _journal(
            self.key,
            self.request,
            _snapshot(before),
            _snapshot(after),
            evidence_id=_text(self.evidence),
            actor_id=self.actor,
            **fields,
        )
        event = NewEvent(event_type, data, event_id=self.operation)
        recorded, _ = append_projected(ctx, tx, stream, event)
        return Correction(self.operation, recorded.event_id, self.nodes, self.evidence, False)

    def retire(
        self,
        ctx: MemoryContext,
        tx: Transaction,
        stream: LockedStream,
        event_type: str,
        retired: Node,
        successor: Node,
        **fields: Any,
    ) -> Correction:
        """Record that ``successor`` retires ``retired`` (a supersede, a settled
        contradiction), with the end of the retired node's validity."""
        _require_not_superseded(retired, successor)
        states = _retire(tx, stream, retired, successor, ctx.clock())
        ended = _interval_end(tx, stream, retired, successor)
        return self.record(ctx, tx, stream, event_type, states, **fields, **ended)


def supersede_locked(
    ctx: MemoryContext,
    tx: Transaction,
    old_id: uuid.UUID,
    new_id: uuid.UUID,
    evidence_id: uuid.UUID | None,
    user_id: str | None,
    actor_id: str | None,
) -> Correction:
    """One supersession inside ``tx`` (which may already hold the owner's lock)."""
    if old_id == new_id:
        raise LifecycleConflictError("a node cannot supersede itself")
    pair = _PairCorrection.of(
        "supersede",
        (old_id, new_id),
        evidence_id,
        actor_id,
        either_way=False,
        old_node_id=str(old_id),
        new_node_id=str(new_id),
    )
    opened = pair.open(ctx, tx, user_id)
    if isinstance(opened, Correction):
        return opened
    stream, rows = opened
    old, new = _nodes(tx, stream, rows)
    fields = {"old_node_id": str(old_id), "new_node_id": str(new_id)}
    return pair.retire(ctx, tx, stream, ev.SUPERSEDED, old, new, **fields)


def backdated_locked(
    ctx: MemoryContext,
    tx: Transaction,
    stream: LockedStream,
    new_id: uuid.UUID,
    successor_id: uuid.UUID,
    predecessor_ids: Sequence[uuid.UUID],
) -> None:
    """A value stored into its history, inside ``tx`` (which holds the owner's lock).

    ``new_id`` took effect before ``successor_id`` (the earliest value that took
    effect after it).  An earlier-effective value never retires a later one: the
    successor ends it instead, when the successor took effect.  The predecessors
    the successor had ended (the value before in effect) now end when ``new_id``
    took effect, and name it: the history is what storing the values in the
    order they took effect gives.  One journaled supersede records all of it.
    """
    wanted = [new_id, successor_id, *predecessor_ids]
    by_id = {row.node_id: row for row in GraphReads(tx).node_rows(wanted)}
    new, successor, *earlier = _nodes(tx, stream, [by_id[i] for i in wanted])
    ended = [p for p in earlier if p.superseded_by == successor.id]
    now = ctx.clock()
    after = [
        _retired_by(new, successor, now),
        successor,
        *(
            _with_state(p, superseded_by=new.id, updated_at=now, valid_to=validity_end(p, new))
            for p in ended
        ),
    ]
    operation = ev.operation_id("supersede", new_id, successor_id)
    request = {
        "old_node_id": str(new_id),
        "new_node_id": str(successor_id),
        "evidence_id": None,
        "actor_id": None,
    }
    data = _journal(
        f"supersede:{operation}",
        request,
        _snapshot([new, successor, *ended]),
        _snapshot(after),
        **request,
        repointed=[str(p.id) for p in ended],
    )
    append_projected(ctx, tx, stream, NewEvent(ev.SUPERSEDED, data, event_id=operation))


# -- contradictions ---------------------------------------------------------------------


def contradict(
    ctx: MemoryContext,
    node_id: uuid.UUID | str,
    other_node_id: uuid.UUID | str,
    *,
    evidence_id: uuid.UUID | str | None = None,
    user_id: str | None = None,
    actor_id: str | None = None,
) -> Correction:
    """Record that two nodes contradict each other; both become contested."""
    (a, b), evidence, user, actor = _pair_inputs(
        node_id, other_node_id, evidence_id, user_id, actor_id
    )
    if a == b:
        raise LifecycleConflictError("a node cannot contradict itself")
    ids = [str(n) for n in sorted([a, b])]
    pair = _PairCorrection.of("contradict", (a, b), evidence, actor, either_way=True, node_ids=ids)
    with ctx.store.transaction() as tx:
        opened = pair.open(ctx, tx, user)
        if isinstance(opened, Correction):
            return opened
        stream, rows = opened
        nodes = _nodes(tx, stream, rows)
        _require_not_superseded(*nodes)
        now = ctx.clock()
        contested = [
            _with_state(n, lifecycle=LifecycleState.CONTESTED, updated_at=now) for n in nodes
        ]
        states = (nodes, contested)
        return pair.record(ctx, tx, stream, ev.CONTRADICTED, states, node_ids=[str(a), str(b)])


def resolve_contradiction(
    ctx: MemoryContext,
    winner_node_id: uuid.UUID | str,
    loser_node_id: uuid.UUID | str,
    *,
    evidence_id: uuid.UUID | str | None = None,
    user_id: str | None = None,
    actor_id: str | None = None,
) -> Correction:
    """Settle a contradiction: the loser is superseded by the winner."""
    (winner, loser), evidence, user, actor = _pair_inputs(
        winner_node_id, loser_node_id, evidence_id, user_id, actor_id
    )
    pair = _PairCorrection.of(
        "resolve",
        (winner, loser),
        evidence,
        actor,
        either_way=True,
        node_ids=[str(n) for n in sorted([winner, loser])],
        winner_node_id=str(winner),
    )
    with ctx.store.transaction() as tx:
        opened = pair.open(ctx, tx, user)
        if isinstance(opened, Correction):
            return opened
        stream, rows = opened
        if loser not in _open_contradictions(tx, winner):
            raise LifecycleConflictError("there is no open contradiction between these nodes")
        won, lost = _nodes(tx, stream, rows)
        fields = {"winner_node_id": str(winner), "loser_node_id": str(loser)}
        return pair.retire(ctx, tx, stream, ev.CONTRADICTION_RESOLVED, lost, won, **fields)


def _retire(
    tx: Transaction, stream: LockedStream, retired: Node, successor: Node, now: datetime
) -> tuple[list[Node], list[Node]]:
    """Before- and after-states of every node that retiring ``retired`` changes.

    The retired node's open contradictions are settled with it: each partner
    stays contested only while it has other open contradictions.
    """
    partners = _open_contradictions(tx, retired.id)
    others = partners - {successor.id}
    rows = GraphReads(tx).node_rows(others) if others else []
    touched = {successor.id: successor, **{n.id: n for n in _nodes(tx, stream, rows)}}
    after = [_retired_by(retired, successor, now)]
    for node in touched.values():
        if node.id in partners and node.lifecycle is LifecycleState.CONTESTED:
            still_open = _open_contradictions(tx, node.id) - {retired.id}
            if not still_open:
                node = _with_state(node, lifecycle=LifecycleState.ACTIVE, updated_at=now)
        after.append(node)
    return [retired, *touched.values()], after


def _retired_by(retired: Node, successor: Node, now: datetime) -> Node:
    return _with_state(
        retired,
        lifecycle=LifecycleState.SUPERSEDED,
        superseded_by=successor.id,
        updated_at=now,
        valid_to=validity_end(retired, successor),
    )


def validity_end(retired: Node, successor: Node) -> datetime:
    """The effective time a retirement ends ``retired``'s validity: when its successor
    took effect, never before it began itself (an explicit correction by an
    earlier-effective memory leaves it an empty interval: it never held)."""
    return max(successor.occurred_at, retired.occurred_at)


def _interval_end(
    tx: Transaction, stream: LockedStream, retired: Node, successor: Node
) -> dict[str, Any]:
    """``valid_to`` of a retired claim, as an automatic retirement records it.

    The interval closes at the successor's source-effective time (a claim's own
    ``valid_from``; for another node, when its source message took effect), but
    never before the claim began: an explicit decision may retire a claim with
    an earlier-effective one, where the automatic rules would retire nothing.
    Nodes that are not claims have no interval, and their records no ``valid_to``.
    """
    claims = GraphReads(tx)
    row = claims.claim(stream.ref.stream_id, retired.id)
    if row is None:
        return {}
    successor_row = claims.claim(stream.ref.stream_id, successor.id)
    if successor_row is not None:
        effective = successor_row.valid_from
    else:
        [source] = tx.get_events([successor.event_id])
        effective = datetime.fromisoformat(effective_at(source))
    return {"valid_to": max(effective, row.valid_from).isoformat()}


def _open_contradictions(tx: Transaction, node_id: uuid.UUID) -> set[uuid.UUID]:
    partners = set()
    for edge in GraphReads(tx).edges_touching(node_id):
        if edge.kind == "CONTRADICTS" and edge.resolved_at is None:
            partners.add(edge.target_node if edge.source_node == node_id else edge.source_node)
    return partners


# -- reinforce --------------------------------------------------------------------------


def reinforce(
    ctx: MemoryContext,
    node_id: uuid.UUID | str,
    *,
    evidence_id: uuid.UUID | str | None = None,
    user_id: str | None = None,
    request_id: uuid.UUID | str | None = None,
) -> Node:
    """Apply one confirmation to a node; a repeated ``request_id`` applies it once."""
    target = inputs.node_id(node_id)
    evidence = inputs.evidence_id(evidence_id)
    request_uuid = inputs.request_id(request_id)
    user = None if user_id is None else inputs.user(user_id)
    with ctx.store.transaction() as tx:
        stream, [row] = lock_owner(ctx, tx, [target], user)
        cipher = _cipher(tx, stream)
        key = None if request_uuid is None else f"reinforce:{request_uuid}"
        request = {"node_id": str(target), "evidence_id": _text(evidence)}
        if key is not None and earlier_operation(tx, cipher, key, request) is not None:
            return node_from_row(cipher, row)  # the current node; nothing applied again
        check_evidence(tx, evidence, stream.ref.stream_id, row.scope)
        [node] = _nodes(tx, stream, [row])
        if node.lifecycle is LifecycleState.SUPERSEDED:
            raise NodeUnavailableError()
        confirmed = _confirmed(node, ctx.clock())
        data = _journal(
            key,
            request,
            _snapshot([node]),
            _snapshot([confirmed]),
            request_id=_text(request_uuid),
            node_id=str(target),
            evidence_id=_text(evidence),
        )
        event_id = (
            None  # the log draws one (see store)
            if request_uuid is None
            else ev.operation_id("reinforce", stream.ref.stream_id, request_uuid)
        )
        append_projected(ctx, tx, stream, NewEvent(ev.REINFORCED, data, event_id=event_id))
        return confirmed


def _confirmed(node: Node, now: Any) -> Node:
    """The reinforcement rule: fixed steps up to caps; values above a cap stay."""
    return _with_state(
        node,
        reinforcement_boost=max(
            node.reinforcement_boost,
            min(node.reinforcement_boost + REINFORCEMENT_STEP, REINFORCEMENT_CAP),
        ),
        confidence_base=max(
            node.confidence_base, min(node.confidence_base + CONFIDENCE_STEP, CONFIDENCE_CAP)
        ),
        reinforcement_count=node.reinforcement_count + 1,
        last_reinforced_at=now,
        updated_at=now,
    )


# -- triggers and attractors ------------------------------------------------------------


def add_resonance_trigger(
    ctx: MemoryContext,
    *,
    user_id: str,
    keyword: str | None = None,
    text: str | None = None,
    weight: float = 1.0,
    threshold: float = 0.8,
) -> uuid.UUID:
    """Boost nodes containing ``keyword`` or resembling ``text``; weight in [0, 10]."""
    if (keyword is None) == (text is None):
        raise InvalidInputError("give exactly one of keyword or text")
    trigger_id = uuid.uuid4()
    data = {
        "trigger_id": str(trigger_id),
        "keyword": None if keyword is None else inputs.content(keyword),
        "text": None if text is None else inputs.content(text),
        "weight": inputs.bounded(weight, "weight", 0.0, MAX_TRIGGER_WEIGHT),
        "threshold": inputs.bounded(threshold, "threshold", -1.0, 1.0),
    }
    _append_for_user(ctx, user_id, NewEvent(ev.TRIGGER_ADDED, data))
    return trigger_id


def remove_resonance_trigger(
    ctx: MemoryContext, trigger_id: uuid.UUID | str, *, user_id: str
) -> None:
    """Remove a resonance trigger; unknown ids raise ``NotFoundError``."""
    wanted = parse_uuid(trigger_id, "trigger id")
    if wanted not in queries.trigger_ids(ctx, user_id=inputs.user(user_id)):
        raise NotFoundError("resonance trigger is not available")
    _append_for_user(ctx, user_id, NewEvent(ev.TRIGGER_REMOVED, {"trigger_id": str(wanted)}))


def add_negative_attractor(
    ctx: MemoryContext,
    text: str,
    *,
    user_id: str,
    description: str | None = None,
    source: str | None = None,
    severity: float = 1.0,
) -> uuid.UUID:
    """Demote nodes that resemble ``text`` in retrieval; severity in [0, 1]."""
    attractor_id = uuid.uuid4()
    data = {
        "attractor_id": str(attractor_id),
        "text": inputs.content(text),
        "description": inputs.optional_text(description, "description", 1000),
        "source": inputs.optional_text(source, "source", 200),
        "severity": inputs.bounded(severity, "severity", 0.0, 1.0),
    }
    _append_for_user(ctx, user_id, NewEvent(ev.ATTRACTOR_ADDED, data))
    return attractor_id


def clear_negative_attractors(ctx: MemoryContext, *, user_id: str) -> None:
    _append_for_user(ctx, user_id, NewEvent(ev.ATTRACTORS_CLEARED, {}))


def _append_for_user(ctx: MemoryContext, user_id: str, event: NewEvent) -> RecordedEvent:
    user = inputs.user(user_id)
    with ctx.store.transaction() as tx:
        stream = tx.lock_stream(Subject(ctx.namespace, user), create=True)
        recorded, _ = append_projected(ctx, tx, stream, event)
    return recorded


# -- helpers --------------------------------------------------------------------------


def _require_not_superseded(*nodes: Node) -> None:
    if any(n.lifecycle is LifecycleState.SUPERSEDED for n in nodes):
        raise LifecycleConflictError("a superseded node cannot take part in a correction")


def _with_state(node: Node, **changes: Any) -> Node:
    return replace(node, **changes)


def _text(value: uuid.UUID | None) -> str | None:
    return None if value is None else str(value)
