"""The data-protection officer's desk over HTTP (``/v1/dpo``): look a person up,
act on their request (export, forget, restrict, hold) with a reference, and the
request register with its CSV/JSON export.

Operators only, in their key's namespace; the register is also open to auditors.
The person is named by user id in the body (never in a URL, which logs keep) and
hashed on the server.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import asdict
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Query, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, StringConstraints

from appdata.apikeys import Principal
from eventstore import subject_rights as rights
from oblivio.http import schemas as s
from oblivio.http.auth import Auditor, Operator, acting_actor
from oblivio.http.compliance_routes import STILL_ERASING, erasure_response
from oblivio.http.errors import api_router
from oblivio.memory import dpo, inputs
from oblivio.memory.context import MemoryContext

T = TypeVar("T")

router = api_router("/v1/dpo", "dpo")

Reference = Annotated[
    str,
    StringConstraints(pattern=rights.REFERENCE.pattern, min_length=1, max_length=64),
    Field(description="A ticket or letter id the action answers: [A-Za-z0-9_.:/-]{1,64}."),
]
RestrictionGround = Literal["art18-1-a", "art18-1-b", "art18-1-c", "art18-1-d"]
HoldGround = Literal["art17-3-b", "art17-3-e"]
ExtensionReason = Literal["complexity", "number_of_requests"]
RequestKind = Literal["erasure", "access", "restriction"]
RequestStatus = Literal["open", "completed", "refused", "failed"]


class PersonRequest(BaseModel):
    model_config = s.Strict
    user_id: s.UserId


class ActionRequest(PersonRequest):
    reference: Reference


class ForgetForRequest(ActionRequest):
    legal_ground: s.LegalGround = "art17-1-b"
    wait_seconds: float = Field(default=5.0, ge=0, le=60, strict=True, allow_inf_nan=False)


class RestrictRequest(ActionRequest):
    ground: RestrictionGround


class HoldRequest(ActionRequest):
    ground: HoldGround


class ExtendRequest(BaseModel):
    model_config = s.Strict
    reason: ExtensionReason


class RegisterEntryOut(dpo.RegisterEntry):
    # The register's record as it is: its fields, order and types are the answer's.
    pass


class PersonOut(BaseModel):
    subject_ref: str
    namespace: str
    holds_data: bool
    memories: list[dict[str, Any]]
    restriction: dict[str, Any] | None
    hold: dict[str, Any] | None
    requests: list[RegisterEntryOut]


class RegisterPageOut(BaseModel):
    requests: list[RegisterEntryOut]
    total: int
    page: int
    per_page: int


class ExportOut(BaseModel):
    request: RegisterEntryOut
    export: dict[str, Any]


def _entry(entry: dpo.RegisterEntry) -> RegisterEntryOut:
    return RegisterEntryOut(**asdict(entry))


@router.post("/people/lookup", response_model=PersonOut)
def look_up(body: PersonRequest, caller: Operator) -> PersonOut:
    """A person of the key's namespace: requests of every kind, counts of current
    memories by scope and type, restriction and hold."""
    person = dpo.look_up(caller.ctx, body.user_id)
    fields = asdict(person)
    fields["requests"] = [_entry(r) for r in person.requests]
    return PersonOut(**fields)


@router.post("/people/export", response_model=ExportOut)
def export_for(body: ActionRequest, caller: Operator) -> ExportOut:
    """Serve an access/portability request (Art. 15/20): the signed subject export,
    recorded in the register."""
    entry, exported = dpo.export_for(
        caller.ctx, body.user_id, reference=body.reference, actor_id=acting_actor(caller.who)
    )
    return ExportOut(request=_entry(entry), export=exported)


@router.post("/people/forget", response_model=s.ErasureOut, responses=STILL_ERASING)
def forget_for(body: ForgetForRequest, caller: Operator) -> JSONResponse:
    """Erase a person on their request, with its reference (409 naming the ground when
    the person is under a legal hold: the refusal is in the register)."""
    status = dpo.forget_for(
        caller.ctx,
        body.user_id,
        reference=body.reference,
        actor_id=acting_actor(caller.who),
        legal_ground=body.legal_ground,
        wait=body.wait_seconds > 0,
        timeout=body.wait_seconds,
    )
    return erasure_response(s.ErasureOut.of(status))


def _for_person(
    operation: Callable[..., T],
    body: ActionRequest,
    ctx: MemoryContext,
    who: Principal,
    **more: Any,
) -> T:
    """``operation`` of ``oblivio.memory.dpo`` on the body's person and reference, by the
    acting key."""
    return operation(
        ctx, body.user_id, reference=body.reference, actor_id=acting_actor(who), **more
    )


@router.post("/people/restrict", response_model=RegisterEntryOut)
def restrict(body: RestrictRequest, caller: Operator) -> RegisterEntryOut:
    """Restrict processing of a person (Art. 18)."""
    return _entry(_for_person(dpo.restrict, body, caller.ctx, caller.who, ground=body.ground))


@router.post("/people/lift-restriction", status_code=204)
def lift_restriction(body: ActionRequest, caller: Operator) -> Response:
    """End a person's restriction of processing."""
    _for_person(dpo.lift_restriction, body, caller.ctx, caller.who)
    return Response(status_code=204)


@router.post("/people/hold", status_code=201)
def place_hold(body: HoldRequest, caller: Operator) -> dict[str, Any]:
    """Place a legal hold (Art. 17(3)) on a person's data."""
    return asdict(_for_person(dpo.place_hold, body, caller.ctx, caller.who, ground=body.ground))


@router.post("/people/lift-hold", status_code=204)
def lift_hold(body: ActionRequest, caller: Operator) -> Response:
    """Lift a person's legal hold; refused erasures can then be run again."""
    _for_person(dpo.lift_hold, body, caller.ctx, caller.who)
    return Response(status_code=204)


@router.get("/requests", response_model=RegisterPageOut)
def register(
    caller: Auditor,
    kind: RequestKind | None = None,
    status: RequestStatus | None = None,
    reference: Reference | None = None,
    overdue: bool = False,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    per_page: Annotated[int, Query(ge=1, le=inputs.MAX_PAGE_SIZE)] = 25,
) -> RegisterPageOut:
    """The register of data-subject requests of every kind, newest first."""
    found = dpo.register(
        caller.ctx,
        kind=kind,
        status=status,
        reference=reference,
        overdue_only=overdue,
        page=page,
        per_page=per_page,
    )
    return RegisterPageOut(
        requests=[_entry(e) for e in found.entries],
        total=found.total,
        page=found.page,
        per_page=found.per_page,
    )


@router.get(
    "/register",
    response_class=Response,
    responses={
        200: {
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/csv": {"schema": {"type": "string"}},
            }
        }
    },
)
def export_register(
    caller: Auditor,
    format: Literal["json", "csv"] = "json",
    kind: RequestKind | None = None,
    status: RequestStatus | None = None,
    overdue: bool = False,
) -> Response:
    """The whole register (filtered), as JSON or CSV, for an auditor or a regulator."""
    text = dpo.export_register(
        caller.ctx, format=format, kind=kind, status=status, overdue_only=overdue
    )
    media = "text/csv" if format == "csv" else "application/json"
    return Response(text, media_type=media)


@router.get("/requests/{request_id}", response_model=RegisterEntryOut)
def request_entry(request_id: uuid.UUID, caller: Auditor) -> RegisterEntryOut:
    """One request of the register."""
    return _entry(dpo.entry(caller.ctx, request_id))


@router.post("/requests/{request_id}/extend", response_model=RegisterEntryOut)
def extend(request_id: uuid.UUID, body: ExtendRequest, caller: Operator) -> RegisterEntryOut:
    """Extend a request's legal deadline by two further months (Art. 12(3)), once."""
    return _entry(
        dpo.extend_deadline(
            caller.ctx, request_id, reason=body.reason, actor_id=acting_actor(caller.who)
        )
    )
