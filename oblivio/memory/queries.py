"""Queries: read the projections as a caller may see them.

Reads never return erased content: erased events come back from the log
without content, purged nodes are gone, and a destroyed key leaves nothing
to decrypt.  A caller bound to a user id sees other owners' ids exactly like
ids that do not exist.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from eventstore import ReadView, RecordedEvent
from eventstore.errors import InvalidInputError
from eventstore.ids import parse_uuid
from oblivio.errors import NodeUnavailableError
from oblivio.memory import inputs
from oblivio.memory.context import MemoryContext
from oblivio.memory.records import EmbedderInfo, MemoryEvent, NodePage, Retrieval
from projections import events as ev
from projections import retrieval_service
from projections.claims.records import claim_state
from projections.dates import named_period
from projections.errors import ProcessingRestrictedError
from projections.model import (
    AssertionState,
    EdgeKind,
    LifecycleState,
    LikelyUpdate,
    Node,
    NodeType,
    Role,
    Scope,
    SourceType,
)
from projections.reads import GraphReads, NodeRow, node_from_row
from projections.retrieval_index import NodeFilter, meta_matches
from projections.store_embedders import current_embedder

DEFAULT_PAGE = 50
MAX_PAGE = 1000
SUBJECT_PAGE = 500
#: How many events one retrieve may be restricted to (``event_ids``).
MAX_EVENT_IDS = 100_000


def owner_stream(ctx: MemoryContext, user_id: str | None) -> int | None:
    """The current stream id of a bound caller (None for operators)."""
    if user_id is None:
        return None
    head = ctx.store.head(ctx.namespace, inputs.user(user_id))
    return -1 if head is None or head.closed_at else head.stream.stream_id


def _visible(row: NodeRow | None, owner: int | None) -> NodeRow | None:
    if row is None or (owner is not None and row.stream_id != owner):
        return None
    return row


def _decrypt(view: ReadView, row: NodeRow) -> Node | None:
    cipher = view.cipher(row.stream_id)
    return None if cipher is None else node_from_row(cipher, row)


# -- events -------------------------------------------------------------------------------


def get_event(
    ctx: MemoryContext, event_id: uuid.UUID | str, *, user_id: str | None = None
) -> MemoryEvent | None:
    """A stored memory event, or ``None`` when unavailable (missing, foreign, erased)."""
    wanted = parse_uuid(event_id, "event id")
    owner_key = None if user_id is None else ctx.store.subject_ref(ctx.namespace, user_id)
    for event in ctx.store.get_events([wanted], namespace=ctx.namespace):
        if is_memory_event(ctx, event) and (
            owner_key is None or event.stream.subject_key.hex() == owner_key
        ):
            return memory_event(event)
    return None


def get_events(
    ctx: MemoryContext,
    *,
    user_id: str,
    after_version: int = 0,
    limit: int = DEFAULT_PAGE,
    scope: Scope | str | None = None,
    session_id: str | None = None,
    source_type: SourceType | str | None = None,
) -> list[MemoryEvent]:
    """The caller's stored memories in order, a page at a time (``after_version``)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise InvalidInputError("limit must be an integer between 1 and 1000")
    if (
        isinstance(after_version, bool)
        or not isinstance(after_version, int)
        or not 0 <= after_version < 2**62
    ):
        raise InvalidInputError("after_version must be a non-negative integer below 2**62")
    wanted_scope = None if scope is None else inputs.choice(Scope, scope, "scope")
    wanted_source = (
        None if source_type is None else inputs.choice(SourceType, source_type, "source_type")
    )
    page: list[MemoryEvent] = []
    version = after_version
    while len(page) < limit:
        batch = ctx.store.read_stream(
            ctx.namespace, inputs.user(user_id), from_version=version + 1, limit=limit * 2
        )
        if not batch:
            break
        for event in batch:
            version = event.version
            if not is_memory_event(ctx, event):
                continue
            memory = memory_event(event)
            if _matches(memory, wanted_scope, session_id, wanted_source):
                page.append(memory)
                if len(page) == limit:
                    break
    return page


def _matches(
    memory: MemoryEvent, scope: Scope | None, session_id: str | None, source: SourceType | None
) -> bool:
    return (
        (scope is None or memory.scope is scope)
        and (session_id is None or memory.session_id == session_id)
        and (source is None or memory.source_type is source)
    )


def is_memory_event(ctx: MemoryContext, event: RecordedEvent) -> bool:
    return event.type == ev.STORED and event.stream.namespace == ctx.namespace and not event.erased


def memory_event(event: RecordedEvent) -> MemoryEvent:
    data = event.data or {}
    return MemoryEvent(
        id=event.event_id,
        user_id=data["user_id"],
        content=data["content"],
        scope=Scope(data["scope"]),
        role=Role(data["role"]),
        source_type=SourceType(data["source_type"]),
        node_type=NodeType(data["node_type"]),
        session_id=data.get("session_id"),
        meta=data.get("meta") or {},
        version=event.version,
        recorded_at=event.recorded_at,
        occurred_at=ev.effective_at(data, event.recorded_at),
    )


def subjects(ctx: MemoryContext) -> list[str]:
    """User ids that have readable memories in this namespace, sorted (operators).

    Raw user ids are on disk only inside their owners' encrypted events, so
    this decrypts one event per subject: its cost grows with the number of
    subjects.  It serves administration and framework adapters that must
    enumerate people (LangGraph's ``list_namespaces``), not a request path.
    """
    with ctx.store.reading() as view:
        event_ids = GraphReads(view).one_event_per_subject(ctx.namespace)
    found: set[str] = set()
    for start in range(0, len(event_ids), SUBJECT_PAGE):
        events = ctx.store.get_events(event_ids[start : start + SUBJECT_PAGE])
        found.update(e.data["user_id"] for e in events if is_memory_event(ctx, e) and e.data)
    return sorted(found)


def subject_ref(ctx: MemoryContext, user_id: str) -> str:
    """The pseudonymous reference (hex keyed hash) certificates and audit entries name
    ``user_id`` by: a caller can check that a certificate is about the person it asked."""
    return ctx.store.subject_ref(ctx.namespace, inputs.user(user_id))


def embedder_info(ctx: MemoryContext) -> EmbedderInfo:
    """The store's embedder, as the store records it: one per store, chosen by name, so
    every process (server, workers, MCP, facade) embeds with it (see ``oblivio rebuild
    vectors`` to move a store to another)."""
    current = current_embedder(ctx.store)
    return EmbedderInfo(current.name, current.spec, current.dimension)


# -- nodes --------------------------------------------------------------------------------


def get_event_nodes(
    ctx: MemoryContext, event_id: uuid.UUID | str, *, user_id: str | None = None
) -> list[Node]:
    """The nodes derived from one event (all lifecycles), in extraction order."""
    wanted = parse_uuid(event_id, "event id")
    owner = owner_stream(ctx, user_id)
    with ctx.store.reading() as view:
        rows = GraphReads(view).nodes_of_event(wanted, namespace=ctx.namespace)
        visible = [r for r in rows if _visible(r, owner) is not None]
        return [n for n in (_decrypt(view, r) for r in visible) if n is not None]


def get_node(
    ctx: MemoryContext,
    node_id: uuid.UUID | str,
    *,
    user_id: str | None = None,
    include_superseded: bool = False,
) -> Node | None:
    """A node, or ``None`` when unavailable; superseded nodes only on request."""
    wanted = parse_uuid(node_id, "node id")
    owner = owner_stream(ctx, user_id)
    with ctx.store.reading() as view:
        row = _visible(GraphReads(view).node_row(ctx.namespace, wanted), owner)
        if row is None:
            return None
        if row.lifecycle == LifecycleState.SUPERSEDED and not include_superseded:
            return None
        return _decrypt(view, row)


def get_assertion_state(
    ctx: MemoryContext,
    node_id: uuid.UUID | str,
    *,
    user_id: str | None = None,
    as_of: datetime | str | None = None,
) -> AssertionState | None:
    """Whether a node is current, contested or retired, and by which nodes; for a
    claim also its structure, validity interval and what it did to earlier claims.

    ``as_of`` answers for that moment of effective time: retired only if its
    validity had ended by then (and ``None`` if it had not yet taken effect).
    """
    wanted = parse_uuid(node_id, "node id")
    moment = inputs.optional_moment(as_of, "as_of")
    owner = owner_stream(ctx, user_id)
    with ctx.store.reading() as view:
        graph = GraphReads(view)
        row = _visible(graph.node_row(ctx.namespace, wanted), owner)
        if row is None or (moment is not None and row.occurred_at > moment):
            return None
        claim_row = graph.claim(row.stream_id, wanted)
        node = None if claim_row is None else _decrypt(view, row)
        claim = None if node is None else claim_state(node, claim_row)
        supersedes, contradicted_by, retired_in = [], [], None
        edges = graph.edges_touching(wanted)
        updated_by, updates = _likely_updates(ctx, graph, wanted, edges)
        for edge in edges:
            if edge.kind == EdgeKind.SUPERSEDES and edge.source_node == wanted:
                supersedes.append(edge.target_node)
            elif edge.kind == EdgeKind.SUPERSEDES:
                retired_in = edge.event_id
            elif edge.kind == EdgeKind.CONTRADICTS and edge.resolved_at is None:
                other = edge.target_node if edge.source_node == wanted else edge.source_node
                contradicted_by.append(other)
    state = AssertionState(
        node_id=wanted,
        lifecycle=LifecycleState(row.lifecycle),
        superseded_by=row.superseded_by,
        supersedes=supersedes,
        contradicted_by=contradicted_by,
        confidence_base=row.confidence_base,
        reinforcement_boost=row.reinforcement_boost,
        claim=None if claim is None else replace(claim, retired_by_event_id=retired_in),
        archived_at=row.archived_at,
        likely_updated_by=updated_by,
        likely_updates=updates,
    )
    return state if moment is None or _retired_by(row, moment) else _in_effect(state)


def open_likely_updates(ctx: MemoryContext, *, user_id: str) -> dict[uuid.UUID, uuid.UUID]:
    """The caller's open likely updates: each older node id with the newer one's."""
    user = inputs.user(user_id)
    head = ctx.store.head(ctx.namespace, user)
    if head is None or head.closed_at is not None:
        return {}
    with ctx.store.reading() as view:
        edges = GraphReads(view).open_edges(head.stream.stream_id, EdgeKind.LIKELY_UPDATES)
    return {e.target_node: e.source_node for e in edges}


def _likely_updates(
    ctx: MemoryContext, graph: GraphReads, node_id: uuid.UUID, edges: Sequence[Any]
) -> tuple[LikelyUpdate | None, list[LikelyUpdate]]:
    """The likely-update decisions about ``node_id``: the latest that a newer memory
    updates it, and those that it updates older ones, each with its current status."""
    found = [e for e in edges if e.kind == EdgeKind.LIKELY_UPDATES]
    if not found:
        return None, []
    decisions = {
        e.event_id: e.data
        for e in ctx.store.get_events([e.event_id for e in found], namespace=ctx.namespace)
        if e.data is not None
    }
    olds = {r.node_id: r for r in graph.node_rows({e.target_node for e in found})}
    made = [
        _likely_update(edge, decisions[edge.event_id], olds.get(edge.target_node))
        for edge in found
        if edge.event_id in decisions
    ]
    by = [m for m in made if m.old_node_id == node_id]
    return (by[-1] if by else None), [m for m in made if m.new_node_id == node_id]


def _likely_update(edge: Any, data: dict[str, Any], old: NodeRow | None) -> LikelyUpdate:
    if edge.resolved_at is not None:
        status = "rejected"
    elif old is not None and old.superseded_by == edge.source_node:
        status = "confirmed"
    else:
        status = "open"
    return LikelyUpdate(
        old_node_id=edge.target_node,
        new_node_id=edge.source_node,
        status=status,
        decision_event_id=edge.event_id,
        detector=data["detector"],
        version=data["version"],
        rule=data["rule"],
        cues=list(data["cues"]),
        confidence=data["confidence"],
    )


def _retired_by(row: NodeRow, moment: datetime) -> bool:
    """Whether the node's validity had ended at ``moment`` (see ``_holds_at``)."""
    if row.valid_to is not None:
        return bool(row.valid_to <= moment)
    return bool(row.lifecycle == LifecycleState.SUPERSEDED)


def _in_effect(state: AssertionState) -> AssertionState:
    """A state as it stood before its retirement (the retirement not yet in effect)."""
    if state.lifecycle is not LifecycleState.SUPERSEDED:
        return state
    claim = state.claim and replace(state.claim, valid_to=None, retired_by_event_id=None)
    return replace(state, lifecycle=LifecycleState.ACTIVE, superseded_by=None, claim=claim)


def list_nodes(
    ctx: MemoryContext,
    *,
    user_id: str,
    scopes: Collection[Scope | str] | None = None,
    node_types: Collection[NodeType | str] | None = None,
    exclude_node_types: Collection[NodeType | str] | None = None,
    source_types: Collection[SourceType | str] | None = None,
    include_superseded: bool = False,
    include_archived: bool = False,
    after: uuid.UUID | str | None = None,
    limit: int = DEFAULT_PAGE,
    as_of: datetime | str | None = None,
    occurred_since: datetime | str | None = None,
    occurred_until: datetime | str | None = None,
    meta: Mapping[str, Any] | None = None,
) -> NodePage:
    """The caller's current nodes, oldest first, a page at a time.

    The filters are retrieval's: superseded nodes only with
    ``include_superseded``, archived ones only with ``include_archived``;
    ``scopes``, ``node_types`` and ``source_types`` keep nodes with one of the
    values, ``exclude_node_types`` drops some; ``as_of``, ``occurred_since``,
    ``occurred_until`` and ``meta`` as :func:`retrieve` has them.
    Pass the page's ``next_cursor`` (the id of its last node) as ``after`` for
    the next page; a node that is no longer available there raises
    ``NodeUnavailableError``.
    """
    user = inputs.user(user_id)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"limit must be an integer between 1 and {MAX_PAGE}")
    if not isinstance(include_superseded, bool):
        raise InvalidInputError("include_superseded must be true or false")
    if not isinstance(include_archived, bool):
        raise InvalidInputError("include_archived must be true or false")
    start = None if after is None else parse_uuid(after, "after")
    times = inputs.time_filter(as_of, occurred_since, occurred_until)
    wanted_meta = inputs.meta_filter(meta)
    filters: dict[str, Any] = {
        "scopes": _members(Scope, scopes, "scopes"),
        "node_types": _members(NodeType, node_types, "node_types"),
        "exclude_node_types": _members(NodeType, exclude_node_types, "exclude_node_types"),
        "source_types": _members(SourceType, source_types, "source_types"),
        "occurred_since": times.occurred_since,
        "occurred_until": times.occurred_until,
    }
    if times.as_of is not None:  # in effect then (archived or retired since alike)
        filters["valid_at"] = None if include_superseded else times.as_of
        filters["occurred_until"] = _earlier(times.occurred_until, times.as_of)
    else:
        current = (LifecycleState.ACTIVE, LifecycleState.CONTESTED)
        filters["lifecycles"] = None if include_superseded else current
        filters["include_archived"] = include_archived
    owner = owner_stream(ctx, user)
    with ctx.store.reading() as view:
        graph = GraphReads(view)
        position = None if start is None else _position(graph, ctx.namespace, start, owner)
        cipher = None if owner is None or owner < 0 else view.cipher(owner)
        if cipher is None:
            return NodePage([], None)
        page: list[Node] = []
        while len(page) <= limit:  # one more than a page says whether there is more
            rows = graph.stream_nodes(cipher.stream_id, after=position, limit=limit + 1, **filters)
            nodes = [node_from_row(cipher, row) for row in rows]
            page += [n for n in nodes if wanted_meta is None or meta_matches(n.meta, wanted_meta)]
            if len(rows) <= limit:
                break
            position = rows[-1].created_at, rows[-1].node_id
    more = len(page) > limit
    return NodePage(page[:limit], page[limit - 1].id if more else None)


def _earlier(bound: datetime | None, moment: datetime) -> datetime | None:
    """The effective-time bound ``as_of`` implies: effective by ``moment`` (inclusive)."""
    if moment >= datetime.max.replace(tzinfo=UTC) - timedelta(microseconds=1):
        return bound  # the last moment there is: every effective time is by then
    just_after = moment + timedelta(microseconds=1)
    return just_after if bound is None else min(bound, just_after)


def _position(
    graph: GraphReads, namespace: str, node_id: uuid.UUID, owner: int | None
) -> tuple[datetime, uuid.UUID]:
    """Where the caller's node ``node_id`` sits in the listing's order."""
    row = _visible(graph.node_row(namespace, node_id), owner)
    if row is None:
        raise NodeUnavailableError("the node to list after is not available")
    return row.created_at, row.node_id


def _members(
    enum_type: type[Scope] | type[NodeType] | type[SourceType],
    values: Collection[object] | None,
    what: str,
) -> list[Any] | None:
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, Collection):
        raise InvalidInputError(f"{what} must be a list")
    return [inputs.choice(enum_type, v, what) for v in values]


# -- retrieval ----------------------------------------------------------------------------


def wait_for_vectors(ctx: MemoryContext, user_id: str) -> int | None:
    """Block until the vector state includes the caller's last write; the stream id."""
    return ctx.retrieval.wait(ctx.namespace, user_id, ctx.consistency_timeout)


def retrieve(
    ctx: MemoryContext,
    query: str,
    *,
    user_id: str,
    limit: int = 10,
    scopes: Collection[Scope | str] | None = None,
    node_types: Collection[NodeType | str] | None = None,
    exclude_node_types: Collection[NodeType | str] | None = None,
    source_types: Collection[SourceType | str] | None = None,
    include_superseded: bool = False,
    include_archived: bool = False,
    consistent: bool = True,
    as_of: datetime | str | None = None,
    occurred_since: datetime | str | None = None,
    occurred_until: datetime | str | None = None,
    meta: Mapping[str, Any] | None = None,
    resolve_dates: bool = False,
    event_ids: Collection[uuid.UUID | str] | None = None,
) -> Retrieval:
    """The caller's nodes ranked for ``query``, with every score component.

    Each node returned counts one access (Semvec's access frequency: it slows
    the node's fading); archived nodes rank only with ``include_archived``.
    ``as_of`` ranks what was valid at that moment (effective by then, not retired
    by then; recency as it was then); ``occurred_since`` / ``occurred_until``
    keep effective times in [since, until); ``meta`` keeps nodes whose metadata
    has each key with an equal JSON scalar.  Filters apply before ranking: up to
    ``limit`` matching nodes come back, not a filtered top ``limit``.
    With ``resolve_dates`` (and no ``as_of``), a question naming one absolute year,
    month or day is ranked as of the end of that period (:mod:`projections.dates`);
    the result's ``as_of`` says which moment was ranked.  ``event_ids`` ranks only
    the nodes of those stored events (a selection the caller made, such as the
    items a LangGraph filter matched), at most ``MAX_EVENT_IDS``.
    While processing of the person is restricted (Art. 18) the result is empty
    and marked ``restricted``.
    """
    text = inputs.content(query)
    user = inputs.user(user_id)
    if not isinstance(limit, int) or not 1 <= limit <= 1000:
        raise InvalidInputError("limit must be between 1 and 1000")
    if not isinstance(include_archived, bool):
        raise InvalidInputError("include_archived must be true or false")
    times = inputs.time_filter(as_of, occurred_since, occurred_until)
    if not isinstance(resolve_dates, bool):
        raise InvalidInputError("resolve_dates must be true or false")
    moment = times.as_of
    if moment is None and resolve_dates:
        period = named_period(text)
        moment = None if period is None else period.last_moment
    wanted = NodeFilter(
        include_superseded=include_superseded,
        include_archived=include_archived,
        scopes=_values(Scope, scopes, "scopes"),
        node_types=_values(NodeType, node_types, "node_types"),
        excluded_node_types=_values(NodeType, exclude_node_types, "exclude_node_types") or (),
        source_types=_values(SourceType, source_types, "source_types"),
        as_of=moment,
        occurred_since=times.occurred_since,
        occurred_until=times.occurred_until,
        meta=inputs.meta_filter(meta),
        event_ids=_event_selection(event_ids),
    )
    try:
        # A consistent read ranks what replaced what as of the caller's last write:
        # it waits for the likely-update detector to have judged it too.
        results = ctx.retrieval.retrieve(
            ctx.namespace,
            user,
            text,
            wanted,
            limit,
            scoring=ctx.scoring,
            clock=ctx.clock,
            consistent=consistent,
            timeout=ctx.consistency_timeout,
            judged_by=ctx.updates,
        )
    except ProcessingRestrictedError:
        # Art. 18: kept and exportable, but not used; the answer says why it is empty.
        return Retrieval(text, [], restricted=True)
    return Retrieval(text, results, moment)


def _event_selection(values: Collection[uuid.UUID | str] | None) -> frozenset[uuid.UUID] | None:
    if values is None:
        return None
    if isinstance(values, str) or not isinstance(values, Collection):
        raise InvalidInputError("event_ids must be a list")
    if len(values) > MAX_EVENT_IDS:
        raise InvalidInputError(f"event_ids holds at most {MAX_EVENT_IDS} ids")
    return frozenset(parse_uuid(v, "event id") for v in values)


def cache_key(ctx: MemoryContext, user: str) -> str:
    """Whose index a retrieval cache entry holds (see ``retrieval_service.cache_key``)."""
    return retrieval_service.cache_key(ctx.namespace, user)


def _values(
    enum_type: type[Scope] | type[NodeType] | type[SourceType],
    values: Collection[object] | None,
    what: str,
) -> set[str] | None:
    members = _members(enum_type, values, what)
    return None if members is None else {member.value for member in members}


def trigger_ids(ctx: MemoryContext, *, user_id: str) -> set[uuid.UUID]:
    """Ids of the resonance triggers currently applying to the caller."""
    stream_id = wait_for_vectors(ctx, inputs.user(user_id))
    return set() if stream_id is None else ctx.retrieval.trigger_ids(stream_id)


def negative_attractor_count(ctx: MemoryContext, *, user_id: str) -> int:
    """How many negative attractors apply to the caller's retrieval now."""
    stream_id = wait_for_vectors(ctx, inputs.user(user_id))
    return 0 if stream_id is None else ctx.retrieval.attractor_count(stream_id)
