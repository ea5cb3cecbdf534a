"""Operator routes for vector-state rebuild jobs (re-embedding): start one, watch it."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from eventstore.apikeys import Principal
from oblivio.http.auth import acting_actor, current_context, operators
from oblivio.http.errors import problem_responses
from oblivio.http.schemas import Strict
from oblivio.memory import vector_rebuilds
from oblivio.memory.context import MemoryContext
from projections.storage.vector_rebuilds import RebuildProgress

router = APIRouter(
    prefix="/v1/admin/rebuilds",
    tags=["rebuilds"],
    responses=problem_responses(401, 403, 404, 409, 422, 503),
)

Ctx = Annotated[MemoryContext, Depends(current_context)]
Operator = Annotated[Principal, Depends(operators)]


class RebuildRequestIn(BaseModel):
    model_config = Strict
    embedder: str | None = Field(
        default=None,
        min_length=1,
        max_length=300,
        description="Embedder to move the store to (every subject); none: the store's own.",
    )
    user_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=256,
        description="Re-embed only this user's memories (with the store's embedder); "
        "none: every subject.",
    )


class RebuildOut(BaseModel):
    rebuild_id: uuid.UUID
    embedder: str = Field(description="The name the new vectors are stored under.")
    scope: Literal["all", "subject"]
    status: Literal["running", "done", "failed"]
    subjects_total: int
    subjects_done: int
    nodes_total: int = Field(description="Nodes that lacked a vector when the job started.")
    nodes_embedded: int
    created_at: datetime
    finished_at: datetime | None
    last_error: str | None

    @classmethod
    def of(cls, progress: RebuildProgress) -> RebuildOut:
        return cls.model_validate(progress, from_attributes=True)


@router.post("", status_code=202, response_model=RebuildOut)
def start_rebuild(body: RebuildRequestIn, ctx: Ctx, who: Operator) -> RebuildOut:
    """Start re-embedding (audit-logged); the workers do it, blue/green per subject."""
    started = vector_rebuilds.start_vector_rebuild(
        ctx, embedder=body.embedder, user_id=body.user_id, actor_id=acting_actor(who)
    )
    return RebuildOut.of(started)


@router.get("/{rebuild_id}", response_model=RebuildOut)
def get_rebuild(rebuild_id: uuid.UUID, ctx: Ctx, who: Operator) -> RebuildOut:
    """A rebuild job's progress: subjects and nodes done of how many."""
    return RebuildOut.of(vector_rebuilds.vector_rebuild(ctx, rebuild_id))
