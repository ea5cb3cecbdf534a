"""Memory routes: store, read, correct, reinforce, retrieve, triggers and attractors."""

from __future__ import annotations

import uuid
from typing import Annotated, TypeVar

from fastapi import Body, Header, HTTPException, Query, Response

from eventstore.errors import InvalidInputError
from oblivio.http import schemas as s
from oblivio.http.auth import (
    OPERATOR_NAMES_USER,
    Member,
    acting_user,
    required_user,
)
from oblivio.http.encoding import JSON, model_response, retrieve_json
from oblivio.http.errors import api_router
from oblivio.memory import commands, ingest, queries, updates
from oblivio.memory.records import Correction
from projections.model import NodeType, Scope, SourceType

router = api_router("/v1", "memory")

T = TypeVar("T")
MAX_VERSION = 2**62 - 1  # the largest version the store reads (queries.get_events)


def found(value: T | None) -> T:
    """``value``; ``None`` (no such thing, or another user's) answers 404."""
    if value is None:
        raise HTTPException(404, "not found")
    return value


@router.post(
    "/events", status_code=201, response_model=s.StoreResponse, openapi_extra=OPERATOR_NAMES_USER
)
def store_event(body: s.StoreRequest, caller: Member) -> Response:
    """Store a memory for a user and derive its nodes."""
    user = required_user(caller.who, body.user_id)
    stored = commands.store_memory(
        caller.ctx,
        body.content,
        user_id=user,
        scope=body.scope,
        role=body.role,
        session_id=body.session_id,
        source_type=body.source_type,
        node_type=body.node_type,
        meta=body.meta,
        request_id=body.request_id,
        occurred_at=body.occurred_at,
    )
    answer = s.StoreResponse(event_id=stored.event_id, node_ids=list(stored.node_ids))
    return model_response(answer, 201)  # written here: see encoding.py


@router.post(
    "/events:batch",
    status_code=201,
    response_model=s.StoreBatchResponse,
    openapi_extra=OPERATOR_NAMES_USER,
)
def store_events(body: s.StoreBatchRequest, caller: Member) -> Response:
    """Store several memories of one user atomically: every memory is validated
    first, and one invalid memory writes nothing (docs/memory.md, ``store_many``)."""
    user = required_user(caller.who, body.user_id)
    stored = commands.store_many(
        caller.ctx, [m.model_dump(exclude_unset=True) for m in body.memories], user_id=user
    )
    answer = s.StoreBatchResponse(
        results=[s.StoreResponse(event_id=m.event_id, node_ids=list(m.node_ids)) for m in stored]
    )
    return model_response(answer, 201)  # written here: see encoding.py


@router.post(
    "/ingest", status_code=201, response_model=s.IngestResponse, openapi_extra=OPERATOR_NAMES_USER
)
def ingest_messages(body: s.IngestRequest, caller: Member) -> Response:
    """Store raw messages; their claims are extracted asynchronously (docs/ingest.md)."""
    user = required_user(caller.who, body.user_id)
    results = ingest.ingest_batch(
        caller.ctx, body.entries(), user_id=user, wait_for_extraction=body.wait_for_extraction
    )
    answer = s.IngestResponse(
        results=[s.IngestedOut.model_validate(r, from_attributes=True) for r in results]
    )
    return model_response(answer, 201)  # written here: see encoding.py


@router.get("/events", response_model=list[s.EventOut], openapi_extra=OPERATOR_NAMES_USER)
def list_events(
    caller: Member,
    user_id: s.UserId | None = None,
    after_version: Annotated[int, Query(ge=0, le=MAX_VERSION)] = 0,
    limit: Annotated[int, Query(ge=1, le=queries.MAX_PAGE)] = queries.DEFAULT_PAGE,
    scope: Scope | None = None,
    session_id: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
    source_type: SourceType | None = None,
) -> list[s.EventOut]:
    """A user's stored memories in order, optionally only one scope, session or source
    type; page with ``after_version``."""
    events = queries.get_events(
        caller.ctx,
        user_id=required_user(caller.who, user_id),
        after_version=after_version,
        limit=limit,
        scope=scope,
        session_id=session_id,
        source_type=source_type,
    )
    return [s.EventOut.of(e) for e in events]


@router.get("/events/{event_id}", response_model=s.EventOut)
def get_event(event_id: uuid.UUID, caller: Member, user_id: s.UserId | None = None) -> s.EventOut:
    """One stored memory event (of ``user_id`` only, when named)."""
    user = acting_user(caller.who, user_id)
    return s.EventOut.of(found(queries.get_event(caller.ctx, event_id, user_id=user)))


@router.get("/events/{event_id}/nodes", response_model=list[s.NodeOut])
def get_event_nodes(
    event_id: uuid.UUID, caller: Member, user_id: s.UserId | None = None
) -> list[s.NodeOut]:
    """The nodes derived from one event (of ``user_id`` only, when named)."""
    user = acting_user(caller.who, user_id)
    found(queries.get_event(caller.ctx, event_id, user_id=user))
    return [s.NodeOut.of(n) for n in queries.get_event_nodes(caller.ctx, event_id, user_id=user)]


@router.get("/nodes", response_model=s.NodePageOut, openapi_extra=OPERATOR_NAMES_USER)
def list_nodes(
    caller: Member,
    user_id: s.UserId | None = None,
    scopes: Annotated[list[Scope] | None, Query()] = None,
    node_types: Annotated[list[NodeType] | None, Query()] = None,
    exclude_node_types: Annotated[list[NodeType] | None, Query()] = None,
    source_types: Annotated[list[SourceType] | None, Query()] = None,
    include_superseded: bool = False,
    include_archived: bool = False,
    after: uuid.UUID | None = None,
    limit: Annotated[int, Query(ge=1, le=queries.MAX_PAGE)] = queries.DEFAULT_PAGE,
    as_of: s.AwareInstant | None = None,
    occurred_since: Annotated[
        s.AwareInstant | None, Query(description="Effective at or after (before occurred_until).")
    ] = None,
    occurred_until: s.AwareInstant | None = None,
    meta: Annotated[list[s.MetaCondition] | None, Query()] = None,
) -> s.NodePageOut:
    """A user's current nodes, oldest first, with retrieval's filters; page with ``after``
    (the ``next_after`` of the previous page: the id of its last node).

    Superseded nodes appear only with ``include_superseded=true``, nodes archived
    out of the retrieval tier only with ``include_archived=true``; repeat a
    filter parameter to allow several values (``scopes=personal&scopes=work``).
    ``as_of`` lists the nodes in effect at that moment; ``occurred_since`` and
    ``occurred_until`` bound effective times; ``meta`` keeps nodes whose metadata
    has each of its keys with an equal value (or, for ``{"$prefix": text}``, a string
    value starting with ``text``).
    """
    page = queries.list_nodes(
        caller.ctx,
        user_id=required_user(caller.who, user_id),
        scopes=scopes,
        node_types=node_types,
        exclude_node_types=exclude_node_types,
        source_types=source_types,
        include_superseded=include_superseded,
        include_archived=include_archived,
        after=after,
        limit=limit,
        as_of=as_of,
        occurred_since=occurred_since,
        occurred_until=occurred_until,
        meta=None if meta is None else s.meta_conditions(meta),
    )
    return s.NodePageOut.of(page)


@router.get("/nodes/{node_id}", response_model=s.NodeOut)
def get_node(
    node_id: uuid.UUID,
    caller: Member,
    include_superseded: bool = False,
    user_id: s.UserId | None = None,
) -> s.NodeOut:
    """One node (of ``user_id`` only, when named); superseded nodes only with
    ``include_superseded=true``."""
    node = queries.get_node(
        caller.ctx,
        node_id,
        user_id=acting_user(caller.who, user_id),
        include_superseded=include_superseded,
    )
    return s.NodeOut.of(found(node))


@router.get("/nodes/{node_id}/assertion-state", response_model=s.AssertionStateOut)
def get_assertion_state(
    node_id: uuid.UUID,
    caller: Member,
    user_id: s.UserId | None = None,
    as_of: s.AwareInstant | None = None,
) -> s.AssertionStateOut:
    """Whether a node is current, contested or superseded, and by which nodes; with
    ``as_of``, as it stood at that moment (404 before it took effect)."""
    state = queries.get_assertion_state(
        caller.ctx, node_id, user_id=acting_user(caller.who, user_id), as_of=as_of
    )
    return s.AssertionStateOut.of(found(state))


def _correction(result: Correction) -> s.CorrectionOut:
    return s.CorrectionOut(
        operation_id=result.operation_id,
        event_id=result.event_id,
        node_ids=list(result.node_ids),
        evidence_id=result.evidence_id,
        replayed=result.replayed,
    )


def _answered(response: Response, result: Correction) -> s.CorrectionOut:
    """201 for a new correction, 200 when the call repeated an earlier one."""
    if result.replayed:
        response.status_code = 200
    return _correction(result)


@router.post("/supersedences", status_code=201, response_model=list[s.CorrectionOut])
def supersede(
    body: s.SupersedeRequest, caller: Member, response: Response
) -> list[s.CorrectionOut]:
    """Retire old nodes in favour of new ones, atomically; an exact retry is a no-op (200)."""
    if body.corrections is not None:
        if body.pair_given():
            raise InvalidInputError("give either corrections or one old/new pair, not both")
        entries = [c.model_dump() for c in body.corrections]
    elif body.old_node_id and body.new_node_id:
        entries = [
            {
                "old_node_id": body.old_node_id,
                "new_node_id": body.new_node_id,
                "evidence_id": body.evidence_id,
            }
        ]
    else:
        raise InvalidInputError("old_node_id and new_node_id are required")
    results = commands.supersede_many(
        caller.ctx, entries, user_id=acting_user(caller.who, body.user_id), actor_id=body.actor_id
    )
    if all(r.replayed for r in results):
        response.status_code = 200
    return [_correction(r) for r in results]


@router.post("/contradictions", status_code=201, response_model=s.CorrectionOut)
def contradict(body: s.ContradictRequest, caller: Member, response: Response) -> s.CorrectionOut:
    """Record that two nodes contradict each other; an exact retry is a no-op (200)."""
    return _answered(
        response,
        commands.contradict(
            caller.ctx,
            body.node_id,
            body.other_node_id,
            evidence_id=body.evidence_id,
            user_id=acting_user(caller.who, body.user_id),
            actor_id=body.actor_id,
        ),
    )


@router.post("/contradictions/resolutions", status_code=201, response_model=s.CorrectionOut)
def resolve(body: s.ResolveRequest, caller: Member, response: Response) -> s.CorrectionOut:
    """Settle a contradiction: the loser is superseded by the winner; retries answer 200."""
    return _answered(
        response,
        commands.resolve_contradiction(
            caller.ctx,
            body.winner_node_id,
            body.loser_node_id,
            evidence_id=body.evidence_id,
            user_id=acting_user(caller.who, body.user_id),
            actor_id=body.actor_id,
        ),
    )


@router.post(
    "/nodes/{node_id}/likely-update/confirm", status_code=201, response_model=s.CorrectionOut
)
def confirm_likely_update(
    node_id: uuid.UUID, body: s.LikelyUpdateDecisionRequest, caller: Member
) -> s.CorrectionOut:
    """Confirm that the newer memory which likely updates this node replaces it: the
    journaled supersede.  422 when no open likely update names the node."""
    result = updates.confirm_likely_update(
        caller.ctx, node_id, user_id=acting_user(caller.who, body.user_id), actor_id=body.actor_id
    )
    return _correction(result)


@router.post(
    "/nodes/{node_id}/likely-update/reject", status_code=201, response_model=s.RejectionOut
)
def reject_likely_update(
    node_id: uuid.UUID, body: s.LikelyUpdateDecisionRequest, caller: Member
) -> s.RejectionOut:
    """Reject the likely update of this node: both memories stand as before.  422 when
    no open likely update names the node."""
    result = updates.reject_likely_update(
        caller.ctx, node_id, user_id=acting_user(caller.who, body.user_id), actor_id=body.actor_id
    )
    return s.RejectionOut(
        event_id=result.event_id,
        decision_event_id=result.decision_event_id,
        node_ids=list(result.node_ids),
    )


@router.put("/nodes/{node_id}/reinforce", response_model=s.NodeOut)
def reinforce(
    node_id: uuid.UUID,
    caller: Member,
    body: Annotated[s.ReinforceRequest | None, Body()] = None,
    idempotency_key: Annotated[uuid.UUID | None, Header()] = None,
    user_id: s.UserId | None = None,
) -> s.NodeOut:
    """Confirm a node once per ``Idempotency-Key``; returns the current node."""
    node = commands.reinforce(
        caller.ctx,
        node_id,
        evidence_id=None if body is None else body.evidence_id,
        user_id=acting_user(caller.who, user_id),
        request_id=idempotency_key,
    )
    return s.NodeOut.of(node)


@router.post("/retrieve", response_model=s.RetrieveResponse, openapi_extra=OPERATOR_NAMES_USER)
def retrieve(body: s.RetrieveRequest, caller: Member) -> Response:
    """The user's nodes ranked for a query, with every score component."""
    result = queries.retrieve(
        caller.ctx,
        body.query,
        user_id=required_user(caller.who, body.user_id),
        limit=body.limit,
        scopes=body.scopes,
        node_types=body.node_types,
        exclude_node_types=body.exclude_node_types,
        source_types=body.source_types,
        include_superseded=body.include_superseded,
        include_archived=body.include_archived,
        consistent=body.consistent,
        as_of=body.as_of,
        occurred_since=body.occurred_since,
        occurred_until=body.occurred_until,
        meta=body.meta,
        resolve_dates=body.resolve_dates,
        event_ids=body.event_ids,
    )
    # Encoded here rather than validated into s.RetrieveResponse: see encoding.py.
    answer = retrieve_json(result.query, result.results, result.as_of, result.restricted)
    return Response(answer, media_type=JSON)


@router.post(
    "/triggers", status_code=201, response_model=s.IdOut, openapi_extra=OPERATOR_NAMES_USER
)
def add_trigger(body: s.TriggerRequest, caller: Member) -> s.IdOut:
    """Add a resonance trigger (keyword or text) with a weight in [0, 10]."""
    trigger_id = commands.add_resonance_trigger(
        caller.ctx,
        user_id=required_user(caller.who, body.user_id),
        keyword=body.keyword,
        text=body.text,
        weight=body.weight,
        threshold=body.threshold,
    )
    return s.IdOut(id=trigger_id)


@router.delete("/triggers/{trigger_id}", status_code=204, openapi_extra=OPERATOR_NAMES_USER)
def remove_trigger(
    trigger_id: uuid.UUID, caller: Member, user_id: s.UserId | None = None
) -> Response:
    """Remove a resonance trigger."""
    commands.remove_resonance_trigger(
        caller.ctx, trigger_id, user_id=required_user(caller.who, user_id)
    )
    return Response(status_code=204)


@router.post(
    "/attractors", status_code=201, response_model=s.IdOut, openapi_extra=OPERATOR_NAMES_USER
)
def add_attractor(body: s.AttractorRequest, caller: Member) -> s.IdOut:
    """Add a negative attractor that demotes similar nodes."""
    attractor_id = commands.add_negative_attractor(
        caller.ctx,
        body.text,
        user_id=required_user(caller.who, body.user_id),
        description=body.description,
        source=body.source,
        severity=body.severity,
    )
    return s.IdOut(id=attractor_id)


@router.delete("/attractors", status_code=204, openapi_extra=OPERATOR_NAMES_USER)
def clear_attractors(caller: Member, user_id: s.UserId | None = None) -> Response:
    """Remove every negative attractor of the user."""
    commands.clear_negative_attractors(caller.ctx, user_id=required_user(caller.who, user_id))
    return Response(status_code=204)


@router.get("/attractors/count", response_model=s.CountOut, openapi_extra=OPERATOR_NAMES_USER)
def count_attractors(caller: Member, user_id: s.UserId | None = None) -> s.CountOut:
    """How many negative attractors apply to the user's retrieval."""
    count = queries.negative_attractor_count(caller.ctx, user_id=required_user(caller.who, user_id))
    return s.CountOut(count=count)
