"""Routes over one person's memory as a whole: keyed items, the subject reference, and
the list of subjects (what framework adapters such as LangGraph's store need remotely)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from oblivio.http import schemas as s
from oblivio.http.auth import OPERATOR_NAMES_USER, Member, Operator, required_user
from oblivio.http.errors import api_router
from oblivio.http.memory_routes import found
from oblivio.memory import items, queries
from oblivio.memory.records import StoredItem

#: An item key in the path: percent-encoded, it may hold ``/`` (the ``path`` converter).
ItemKey = Annotated[str, Path(min_length=1, max_length=256)]

router = api_router("/v1", "memory")


def _item(item: StoredItem) -> s.StoredItemOut:
    return s.StoredItemOut(
        key=item.key,
        current=s.EventOut.of(item.current),
        revision_ids=list(item.revision_ids),
        created_at=item.created_at,
        expires_at=item.expires_at,
    )


@router.get("/items", response_model=list[s.StoredItemOut], openapi_extra=OPERATOR_NAMES_USER)
def list_items(
    caller: Member,
    user_id: s.UserId | None = None,
    key: Annotated[list[str] | None, Query(max_length=items.MAX_LISTED_KEYS)] = None,
) -> list[s.StoredItemOut]:
    """Every keyed item of a user, each with its current revision; with ``key`` (repeated,
    at most 1,000), only the items among those keys."""
    user = required_user(caller.who, user_id)
    return [_item(i) for i in items.list_items(caller.ctx, user_id=user, keys=key)]


@router.patch("/items", response_model=s.ItemKeysOut, openapi_extra=OPERATOR_NAMES_USER)
def set_item_expiries(body: s.ItemExpiriesRequest, caller: Member) -> s.ItemKeysOut:
    """Move the retention times of items in one transaction; the keys that name an item."""
    user = required_user(caller.who, body.user_id)
    keys = items.set_item_expiries(caller.ctx, body.expiries, user_id=user)
    return s.ItemKeysOut(keys=sorted(keys))


@router.get("/items/{key:path}", response_model=s.StoredItemOut, openapi_extra=OPERATOR_NAMES_USER)
def get_item(key: ItemKey, caller: Member, user_id: s.UserId | None = None) -> s.StoredItemOut:
    """The item ``key`` (its current revision and history); 404 when there is none."""
    return _item(found(items.get_item(caller.ctx, key, user_id=required_user(caller.who, user_id))))


@router.put(
    "/items/{key:path}", response_model=s.ItemRevisionOut, openapi_extra=OPERATOR_NAMES_USER
)
def put_item(key: ItemKey, body: s.ItemPutRequest, caller: Member) -> s.ItemRevisionOut:
    """Store a new revision of the item ``key``; it supersedes the current revision."""
    revision = items.put_item(
        caller.ctx,
        key,
        body.content,
        user_id=required_user(caller.who, body.user_id),
        scope=body.scope,
        source_type=body.source_type,
        node_type=body.node_type,
        meta=body.meta,
        expires_at=body.expires_at,
        occurred_at=body.occurred_at,
    )
    return s.ItemRevisionOut(
        event_id=revision.event_id,
        node_ids=list(revision.node_ids),
        replaced=list(revision.replaced),
    )


@router.get("/subjects", response_model=s.SubjectsOut)
def subjects(caller: Operator) -> s.SubjectsOut:
    """The user ids that have readable memories (operators; cost grows with their number)."""
    return s.SubjectsOut(user_ids=queries.subjects(caller.ctx))


@router.get("/subjects/ref", response_model=s.SubjectRefOut, openapi_extra=OPERATOR_NAMES_USER)
def subject_ref(caller: Member, user_id: s.UserId | None = None) -> s.SubjectRefOut:
    """The pseudonymous reference that certificates and audit entries name the user by."""
    return s.SubjectRefOut(
        subject_ref=queries.subject_ref(caller.ctx, required_user(caller.who, user_id))
    )


@router.get("/embedder", response_model=s.EmbedderOut)
def embedder_info(caller: Member) -> s.EmbedderOut:
    """The store's embedder: one per store, so every client embeds and ranks with it."""
    info = queries.embedder_info(caller.ctx)
    return s.EmbedderOut(name=info.name, spec=info.spec, dimension=info.dimension)
