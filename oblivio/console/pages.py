"""The console's pages.  Each calls the application operation the matching
API route calls (``oblivio.memory.compliance`` and friends), with the same
principal rules, so every action lands in the audit log the same way."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from appdata.apikeys import PRINCIPALS, Principal
from certificates import CertificateVerificationError
from certificates.base64url import b64url_decode
from eventstore.errors import InvalidInputError, NotFoundError
from oblivio.console import sessions
from oblivio.console.chart import time_to_certificate_svg
from oblivio.console.web import HOME, ConsoleRoute, allow, json_download, redirect, render, secured
from oblivio.http.auth import acting_actor, context, served_context
from oblivio.memory import api_keys, compliance, dpo, oversight, queries, vector_rebuilds
from oblivio.memory.context import MemoryContext
from oblivio.memory.health import partition_lag

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)

Who = Annotated[Principal, Depends(sessions.signed_in)]
PAGE = Annotated[int, Query(ge=1, le=1_000_000)]
MEMORIES_PER_PAGE = 100


def served(request: Request, who: Principal) -> MemoryContext:
    """The tenant of the signed-in key: its namespace (a cluster-wide key: the
    server's, seeing every namespace)."""
    return served_context(context(request), who)


def _own(who: Principal) -> str | None:
    """The user id a user principal is confined to; None for the others."""
    return who.user_id if who.kind == "user" else None


# -- signing in -----------------------------------------------------------------------


@router.get("")
def home(who: Who) -> Response:
    """The principal's first page (signed out: the sign-in page, as everywhere)."""
    return redirect(HOME[who.kind])


@router.get("/signin")
def signin_form(request: Request) -> Response:
    return _signin_page(request, None, 200)


def _signin_page(request: Request, error: str | None, status: int) -> Response:
    """The sign-in form with a fresh double-submit nonce (see ``sessions``)."""
    nonce = sessions.new_nonce()
    page = render(request, "signin.html", error=error, nonce=nonce, status_code=status)
    sessions.signin_page_nonce(request, page, nonce)
    return page


@router.post("/signin")
def signin(
    request: Request, api_key: Annotated[str, Form()], nonce: Annotated[str, Form()]
) -> Response:
    sessions.check_signin_nonce(request, nonce)
    try:
        token = sessions.sign_in(request, api_key.strip())
    except HTTPException as refused:
        if refused.status_code != 429:
            return _signin_page(request, "That API key is not valid.", 401)
        page = _signin_page(request, "Too many failed sign-ins; try again later.", 429)
        page.headers["Retry-After"] = (refused.headers or {}).get("Retry-After", "60")
        return page
    response = redirect("/console")
    sessions.set_session_cookie(request, response, token)
    return response


@router.post("/signout")
def signout(request: Request, who: Who, csrf: Annotated[str, Form()]) -> Response:
    sessions.check_csrf(request, csrf)
    sessions.sign_out(request)
    response = redirect("/console/signin")
    sessions.clear_session_cookie(response)
    return response


# -- erasure requests -----------------------------------------------------------------


@router.get("/requests")
def requests_page(
    request: Request,
    who: Who,
    status: str | None = None,
    kind: str | None = None,
    overdue: bool = False,
    page: PAGE = 1,
) -> Response:
    ctx = served(request, who)
    listing = oversight.list_erasure_requests(
        ctx,
        user_id=_own(who),
        status=status or None,
        kind=kind or None,
        overdue_only=overdue,
        page=page,
    )
    filters = {"status": status or "", "kind": kind or "", "overdue": overdue}
    return render(
        request,
        "requests.html",
        who,
        listing=listing,
        filters=filters,
        statuses=sorted(oversight.REQUEST_STATUSES),
        kinds=sorted(oversight.REQUEST_KINDS),
    )


@router.get("/requests/{request_id}")
def request_page(request: Request, request_id: str, who: Who) -> Response:
    ctx = served(request, who)
    summary = oversight.erasure_request(ctx, request_id, user_id=_own(who))
    status = compliance.erasure_status(ctx, summary.request_id)
    return render(request, "request.html", who, summary=summary, status=status)


@router.get("/requests/{request_id}/progress")
def request_progress(request: Request, request_id: str, who: Who) -> Response:
    """The request's jobs as JSON, polled by the request page while it rebuilds."""
    ctx = served(request, who)
    summary = oversight.erasure_request(ctx, request_id, user_id=_own(who))
    status = compliance.erasure_status(ctx, summary.request_id)
    body = {
        "status": status.status,
        "done": status.status in ("completed", "failed"),
        "jobs": [
            {
                "projection": j.projection,
                "status": j.status,
                "attempts": j.attempts,
                "max_attempts": j.max_attempts,
                "last_error": j.last_error,
            }
            for j in status.jobs
        ],
    }
    return secured(JSONResponse(body))


# -- certificates ---------------------------------------------------------------------


@router.get("/certificates/{certificate_id}")
def certificate_page(request: Request, certificate_id: str, who: Who) -> Response:
    ctx = served(request, who)
    certificate = compliance.get_certificate(ctx, certificate_id)
    claims = _claims(certificate)
    if who.kind == "user" and claims.get("subject", {}).get("reference") != (
        ctx.store.subject_ref(ctx.namespace, who.user_id or "")
    ):
        raise NotFoundError("certificate is not available")  # exactly like a missing id
    return _certificate_response(request, who, certificate, claims)


def _certificate_response(
    request: Request, who: Principal | None, certificate: dict[str, Any], claims: dict[str, Any]
) -> Response:
    try:
        compliance.verify_certificate(context(request), certificate)
        server_check = None
    except CertificateVerificationError as e:
        server_check = str(e)
    return render(
        request,
        "certificate.html",
        who,
        claims=claims,
        certificate_json=json.dumps(certificate, separators=(",", ":")),
        server_check=server_check,
    )


def _claims(certificate: dict[str, Any]) -> dict[str, Any]:
    """The payload as stored, decoded for display (its signature is checked separately)."""
    try:
        claims: dict[str, Any] = json.loads(b64url_decode(certificate["payload"]))
    except (KeyError, TypeError, ValueError) as e:
        raise NotFoundError("certificate is not available") from e
    return claims


@router.get("/verify")
def verify_page(request: Request, who: Who) -> Response:
    return render(request, "verify.html", who)


# -- audit trail ----------------------------------------------------------------------


@dataclass(frozen=True)
class AuditQuery:
    """The audit page's filters as typed (query parameters of the page and its export)."""

    action: str = ""
    subject: str = ""
    actor: str = ""
    since: str = ""
    until: str = ""

    def filters(self) -> oversight.AuditFilters:
        return oversight.AuditFilters(
            action=self.action.strip(),
            subject=self.subject.strip().lower(),
            actor=self.actor.strip(),
            since=_utc(self.since, "since"),
            until=_utc(self.until, "until"),
        )


Audit = Annotated[AuditQuery, Depends()]


@router.get("/audit")
def audit_page(
    request: Request,
    who: Who,
    typed: Audit,
    page: PAGE = 1,
    verify_log: bool = False,
    check_chain: bool = False,
) -> Response:
    allow(who, "operator", "auditor")
    ctx = served(request, who)
    filters = typed.filters()
    trail = oversight.audit_trail(ctx, page=page, filters=filters, check_chain=check_chain)
    # A namespaced key walks its namespace's chains; the audit chain is checked above.
    scope = None if ctx.cluster_wide else ctx.namespace
    log_report = ctx.store.verify(scope) if verify_log else None
    fields = asdict(typed)
    return render(
        request,
        "audit.html",
        who,
        trail=trail,
        log_report=log_report,
        filters=fields,
        query=urlencode(fields),
        filtered=any(fields.values()),
        actions=AUDIT_ACTIONS,
    )


#: The actions the audit page's filter offers (any other lowercase dotted name is taken too).
AUDIT_ACTIONS = (
    "erasure.forget",
    "erasure.delete_event",
    "erasure.retention",
    "subject.export",
    "subject.restrict",
    "subject.lift_restriction",
    "subject.hold",
    "subject.lift_hold",
    "subject.erasure_refused",
)


@router.get("/audit/export")
def audit_export(request: Request, who: Who, typed: Audit) -> Response:
    allow(who, "operator", "auditor")
    ctx = served(request, who)
    filters = typed.filters()
    text = compliance.export_audit(
        ctx,
        since=filters.since,
        until=filters.until,
        filters=oversight.audit_filters(ctx, filters),
    )
    return secured(
        Response(
            text,
            media_type="application/x-ndjson",
            headers={"Content-Disposition": 'attachment; filename="oblivio-audit.jsonl"'},
        )
    )


# -- health ---------------------------------------------------------------------------


@router.get("/health")
def health_page(request: Request, who: Who) -> Response:
    allow(who, "operator", "auditor")
    ctx = served(request, who)
    leases, scheduled = oversight.scheduler_state(ctx)
    days = oversight.time_to_certificate(ctx)
    return render(
        request,
        "health.html",
        who,
        lag=partition_lag(ctx),
        jobs=oversight.rebuild_jobs(ctx),
        reembeddings=vector_rebuilds.recent_vector_rebuilds(ctx),
        leases=leases,
        scheduled=scheduled,
        days=days,
        chart=time_to_certificate_svg(days),
        now=ctx.clock(),
    )


# -- keys (operators) ------------------------------------------------------------------


@router.get("/keys")
def keys_page(request: Request, who: Who) -> Response:
    allow(who, "operator")
    return _keys_page(request, who, issued=None)


def _keys_page(request: Request, who: Principal, issued: api_keys.IssuedKey | None) -> Response:
    keys = api_keys.list_api_keys(served(request, who))
    return render(
        request, "keys.html", who, keys=keys, issued=issued, principals=sorted(PRINCIPALS)
    )


@router.post("/keys")
def create_key(
    request: Request,
    who: Who,
    csrf: Annotated[str, Form()],
    principal: Annotated[str, Form()],
    user_id: Annotated[str, Form()] = "",
    expires_at: Annotated[str, Form()] = "",
) -> Response:
    """Create a key and show its token on this one response (never stored, never shown again)."""
    allow(who, "operator")
    sessions.check_csrf(request, csrf)
    issued = api_keys.create_api_key(
        served(request, who),
        principal,
        user_id=user_id.strip() or None,
        expires_at=_utc(expires_at),
        actor_id=acting_actor(who),
    )
    return _keys_page(request, who, issued=issued)


@router.post("/keys/{key_id}/revoke")
def revoke_key(request: Request, key_id: str, who: Who, csrf: Annotated[str, Form()]) -> Response:
    allow(who, "operator")
    sessions.check_csrf(request, csrf)
    api_keys.revoke_api_key(served(request, who), key_id, actor_id=acting_actor(who))
    return redirect("/console/keys")


def _utc(value: str, name: str = "expires_at") -> datetime | None:
    """A form's date-time (a browser's ``datetime-local`` has no zone): taken as UTC."""
    if not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError as e:
        raise InvalidInputError(f"{name} must be a date and time (YYYY-MM-DDTHH:MM)") from e
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# -- my data (user keys) ----------------------------------------------------------------


@router.get("/my")
def my_page(request: Request, who: Who, after: str | None = None) -> Response:
    allow(who, "user")
    ctx = served(request, who)
    user = who.user_id or ""
    nodes = queries.list_nodes(ctx, user_id=user, after=after or None, limit=MEMORIES_PER_PAGE)
    return render(
        request,
        "my.html",
        who,
        nodes=nodes,
        updated=queries.open_likely_updates(ctx, user_id=user),
        subject_ref=ctx.store.subject_ref(ctx.namespace, user),
    )


@router.get("/my/export")
def my_export(request: Request, who: Who) -> Response:
    allow(who, "user")
    _, exported = dpo.export_for(
        served(request, who),
        who.user_id or "",
        reference=dpo.SELF_SERVICE,
        actor_id=acting_actor(who),
    )
    return json_download(exported, "oblivio-my-data.json")


@router.get("/my/forget")
def forget_confirmation(request: Request, who: Who) -> Response:
    allow(who, "user")
    return render(request, "forget.html", who)


@router.post("/my/forget")
def forget(
    request: Request,
    who: Who,
    csrf: Annotated[str, Form()],
    confirm: Annotated[str, Form()] = "",
) -> Response:
    allow(who, "user")
    sessions.check_csrf(request, csrf)
    if confirm != "forget me":
        return render(
            request, "forget.html", who, status_code=422, error="Type “forget me” to confirm."
        )
    status = compliance.forget(
        served(request, who),
        who.user_id or "",
        reason="user_request",
        actor_id=acting_actor(who),
        wait=True,
    )
    # The forget revoked the user's key, and with it this session: the answer is the
    # last page it gets, shown without navigation (every link would ask to sign in).
    if status.certificate is not None:
        return _certificate_response(request, None, status.certificate, _claims(status.certificate))
    return render(request, "forgotten.html", status=status)
