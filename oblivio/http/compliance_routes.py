"""Compliance routes: erasure, request status, certificates, keys, exports."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import HTTPException, Query, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from appdata.apikeys import Principal
from eventstore.errors import NotFoundError
from oblivio.http import schemas as s
from oblivio.http.auth import (
    Auditor,
    Member,
    ProofReader,
    PublicCtx,
    acting_actor,
    acting_user,
)
from oblivio.http.errors import api_router
from oblivio.memory import compliance, dpo, oversight
from oblivio.memory.context import MemoryContext

router = api_router("/v1/compliance", "compliance")


USER_REASONS = frozenset({"user_request"})
#: What a forget over HTTP records as its reason, whoever calls and whatever the
#: body says: the certificate is the operator's attestation, and a reason such
#: as ``ttl_expired`` belongs to the sweeps and tools that run on the host
#: (Python API, CLI), not to a request anyone holding a key can send.
HTTP_FORGET_REASON = "user_request"


def _reason(who: Principal, reason: str) -> str:
    # One event: an operator may record why (``correction``, …); a user may
    # only state that they asked.
    if who.kind == "user" and reason not in USER_REASONS:
        raise HTTPException(403, "users may only give the reason user_request")
    return reason


def _forget_reason(stated: str | None) -> str:
    # A stated reason is recorded or refused, never silently replaced: a caller who
    # said ``legal_obligation`` must not get a certificate that says otherwise.
    if stated not in (None, HTTP_FORGET_REASON):
        raise HTTPException(
            403,
            f"a forget over HTTP is recorded as {HTTP_FORGET_REASON}; other reasons are "
            "given with the CLI or the Python API",
        )
    return HTTP_FORGET_REASON


#: The erasure routes answer 202 while the request is not finished within the wait.
STILL_ERASING: dict[int | str, dict[str, Any]] = {
    202: {"model": s.ErasureOut, "description": "erasure still rebuilding"}
}


def erasure_response(status: s.ErasureOut) -> JSONResponse:
    done = status.status in ("completed", "failed")
    return JSONResponse(
        status.model_dump(mode="json"),
        status_code=200 if done else 202,
        headers={} if done else {"Location": status.status_url},
    )


@router.delete(
    "/users/{user_id}/memory/{event_id}",
    response_model=s.ErasureOut,
    responses=STILL_ERASING,
)
def delete_memory(
    user_id: s.UserId,
    event_id: uuid.UUID,
    caller: Member,
    reason: s.Reason = "user_request",
    legal_ground: s.LegalGround = "art17-1-b",
    wait_seconds: Annotated[float, Query(ge=0, le=60, allow_inf_nan=False)] = 0,
) -> JSONResponse:
    """Hard-delete one event of a user (GDPR Art. 17); the requesting key is recorded."""
    user = acting_user(caller.who, user_id)
    status = compliance.delete_event(
        caller.ctx,
        event_id,
        user_id=user,
        reason=_reason(caller.who, reason),
        legal_ground=legal_ground,
        actor_id=acting_actor(caller.who),
        wait=wait_seconds > 0,
        timeout=wait_seconds,
    )
    return erasure_response(s.ErasureOut.of(status))


@router.post(
    "/users/{user_id}/forget",
    response_model=s.ErasureOut,
    responses=STILL_ERASING,
)
def forget(user_id: s.UserId, caller: Member, body: s.ForgetRequest | None = None) -> JSONResponse:
    """Erase everything of a user; the certificate when it completes within the wait.

    The reason is recorded as ``user_request``; a body stating another is refused (403).
    """
    body = body or s.ForgetRequest()
    user = acting_user(caller.who, user_id)
    assert user is not None
    status = compliance.forget(
        caller.ctx,
        user,
        reason=_forget_reason(body.reason),
        legal_ground=body.legal_ground,
        actor_id=acting_actor(caller.who),
        wait=body.wait_seconds > 0,
        timeout=body.wait_seconds,
    )
    return erasure_response(s.ErasureOut.of(status))


def _own_subject(ctx: MemoryContext, who: Principal) -> str:
    """The pseudonymous reference of a user key's own subject."""
    return ctx.store.subject_ref(ctx.namespace, who.user_id or "")


@router.get("/requests/{request_id}", response_model=s.ErasureOut)
def request_status(request_id: uuid.UUID, caller: ProofReader) -> s.ErasureOut:
    """Where an erasure request stands."""
    status = compliance.erasure_status(caller.ctx, request_id)
    if caller.who.kind == "user" and status.subject_ref != _own_subject(caller.ctx, caller.who):
        raise NotFoundError("erasure request is not available")  # exactly like a missing id
    return s.ErasureOut.of(status)


@router.get("/certificates/{certificate_id}")
def get_certificate(certificate_id: uuid.UUID, caller: ProofReader) -> dict[str, Any]:
    """A forget certificate (JWS JSON serialization)."""
    certificate = compliance.get_certificate(caller.ctx, certificate_id)
    if caller.who.kind == "user":
        payload = compliance.verify_certificate(caller.ctx, certificate)
        if payload["subject"]["reference"] != _own_subject(caller.ctx, caller.who):
            raise NotFoundError("certificate is not available")  # exactly like a missing id
    return certificate


@router.get("/keys")
def keys(ctx: PublicCtx) -> dict[str, Any]:
    """The JWKS of every certificate issuer key, retired ones included (public)."""
    return compliance.jwks(ctx)


@router.get("/users/{user_id}/export")
def export_subject(user_id: s.UserId, caller: Member) -> dict[str, Any]:
    """Everything oblivio holds about a user (Art. 15/20), with a signed manifest."""
    user = acting_user(caller.who, user_id)
    assert user is not None
    reference = dpo.SELF_SERVICE if caller.who.user_id is not None else dpo.API_EXPORT
    _, exported = dpo.export_for(
        caller.ctx, user, reference=reference, actor_id=acting_actor(caller.who)
    )
    return exported


def _aware(value: datetime | None) -> datetime | None:
    """Times without a zone are taken as UTC."""
    return None if value is None else value.replace(tzinfo=value.tzinfo or UTC)


@router.get(
    "/audit/export",
    response_class=PlainTextResponse,
    responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}}}},
)
def export_audit(
    caller: Auditor,
    since: s.Instant | None = None,
    until: s.Instant | None = None,
    action: Annotated[
        str | None,
        Query(description="Only entries of this action.", pattern=r"^[a-z][a-z0-9_.]{0,63}$"),
    ] = None,
    subject_ref: Annotated[
        str | None,
        Query(
            description="Only entries about this subject reference (64 hex).",
            pattern=r"^[0-9a-f]{64}$",
        ),
    ] = None,
    actor: Annotated[
        str | None,
        Query(
            description="Only entries by this actor: an actor reference or an API key id.",
            pattern=r"^([0-9a-f]{64}|[A-Za-z0-9]{1,32})$",
        ),
    ] = None,
) -> Response:
    """The audit stream as JSON Lines; the last line is the signed manifest.

    With filters, the manifest names them and carries the chain inputs of the entries
    left out (``gaps``), so the filtered export still verifies offline.
    """
    wanted = oversight.AuditFilters(
        action=action or "", subject=subject_ref or "", actor=actor or ""
    )
    text = compliance.export_audit(
        caller.ctx,
        since=_aware(since),
        until=_aware(until),
        filters=oversight.audit_filters(caller.ctx, wanted),
    )
    return PlainTextResponse(text, media_type="application/x-ndjson")
