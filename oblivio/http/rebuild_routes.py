"""Operator routes for vector-state rebuild jobs (re-embedding): start one, watch it.

The embedder is the whole store's (every namespace's), and so are its rebuild
jobs: only cluster-wide operator keys reach these routes.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic.config import JsonDict

from oblivio.http.auth import ClusterOperator, acting_actor
from oblivio.http.errors import api_router
from oblivio.http.schemas import Strict, UserId
from oblivio.memory import vector_rebuilds
from projections.embedders import (
    EMBEDDER_NAME,
    EMBEDDER_NAMES,
    MAX_EMBEDDER_NAME_CHARS,
    check_embedder_name,
)
from workers.reembed import RebuildProgress

router = api_router("/v1/admin/rebuilds", "rebuilds", (401, 403, 404, 409, 422, 503))


#: Checked by the one rule of embedder names, whose error lists the names there are (a
#: ``pattern`` constraint would answer with the regular expression); the pattern is
#: published for clients.
EmbedderName = Annotated[
    str,
    AfterValidator(check_embedder_name),
    WithJsonSchema({"type": "string", "pattern": EMBEDDER_NAME}),
]

#: ``embedder`` moves every subject, ``user_id`` re-embeds one with the store's own: a
#: request names at most one of them.
_NOT_BOTH: JsonDict = {
    "not": {
        "required": ["embedder", "user_id"],
        "properties": {"embedder": {"type": "string"}, "user_id": {"type": "string"}},
    }
}


class RebuildRequestIn(BaseModel):
    model_config = ConfigDict(**Strict, json_schema_extra=_NOT_BOTH)
    embedder: EmbedderName | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_EMBEDDER_NAME_CHARS,
        description=f"Embedder to move the store to (every subject): {EMBEDDER_NAMES}; "
        "none: the store's own. One this server cannot load answers 409 "
        "EmbedderNotLoadableError.",
    )
    user_id: UserId | None = Field(
        default=None,
        description="Re-embed only this user's memories (with the store's embedder; not "
        "with embedder); none: every subject.",
    )

    @model_validator(mode="after")
    def _one_scope(self) -> RebuildRequestIn:
        if self.embedder is not None and self.user_id is not None:
            raise ValueError("give embedder (every subject) or user_id, not both")
        return self


class RebuildOut(BaseModel):
    rebuild_id: uuid.UUID
    embedder: str = Field(description="The name the new vectors are stored under.")
    scope: Literal["all", "subject"]
    status: Literal["running", "done", "failed"]
    subjects_total: int
    subjects_done: int
    nodes_total: int = Field(
        description="Nodes the job re-embeds: those holding another embedder's vector "
        "when it started (not yet embedded ones get the target's from the vector projection)."
    )
    nodes_embedded: int
    created_at: datetime
    finished_at: datetime | None
    last_error: str | None

    @classmethod
    def of(cls, progress: RebuildProgress) -> RebuildOut:
        return cls.model_validate(progress, from_attributes=True)


@router.post("", status_code=202, response_model=RebuildOut)
def start_rebuild(body: RebuildRequestIn, caller: ClusterOperator) -> RebuildOut:
    """Start re-embedding (audit-logged); the workers do it, blue/green per subject."""
    started = vector_rebuilds.start_vector_rebuild(
        caller.ctx, embedder=body.embedder, user_id=body.user_id, actor_id=acting_actor(caller.who)
    )
    return RebuildOut.of(started)


#: A rebuild id.  Checked after the operator check (a user key gets 403 whatever it
#: names), like the key ids of /v1/admin/keys.
RebuildId = Annotated[
    str,
    StringConstraints(pattern=r"^[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$"),
]


@router.get("/{rebuild_id}", response_model=RebuildOut)
def get_rebuild(rebuild_id: RebuildId, caller: ClusterOperator) -> RebuildOut:
    """A rebuild job's progress: subjects and nodes done of how many."""
    return RebuildOut.of(vector_rebuilds.vector_rebuild(caller.ctx, rebuild_id))
