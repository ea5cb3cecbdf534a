"""The console's data-protection officer's desk: look a person up (by user id,
hashed on the server), act on their request with a reference and a typed
confirmation, and the request register.  Each page calls the operation the
``/v1/dpo`` route calls (``oblivio.memory.dpo``), so every action lands in the
register and the audit log the same way, with the operator's key as actor.

A person's user id travels only in POSTed forms (never in a URL, which browser
history and logs keep); the pages show the pseudonymous subject reference.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import Response

from appdata.apikeys import Principal
from eventstore import subject_rights as rights
from eventstore.errors import ConflictError, InvalidInputError, NotFoundError
from oblivio.console import sessions
from oblivio.console.web import ConsoleRoute, allow, json_download, render, secured
from oblivio.http.auth import acting_actor, context, served_context
from oblivio.memory import dpo
from oblivio.memory.context import MemoryContext

router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)

Who = Annotated[Principal, Depends(sessions.signed_in)]
UserId = Annotated[str, Form()]
Reference = Annotated[str, Form()]
Confirm = Annotated[str, Form()]
Csrf = Annotated[str, Form()]


@dataclass(frozen=True)
class PersonForm:
    """What every action on a person posts: the form's CSRF token, the person, the
    reference of the request it answers and the typed confirmation."""

    csrf: str
    user_id: str
    reference: str
    confirm: str


def person_form(
    csrf: Csrf, user_id: UserId, reference: Reference = "", confirm: Confirm = ""
) -> PersonForm:
    return PersonForm(csrf, user_id, reference.strip(), confirm)


Person = Annotated[PersonForm, Depends(person_form)]

#: What an operator types to confirm each action (the button alone is not enough).
CONFIRMATIONS = {
    "export": "export",
    "forget": "forget",
    "restrict": "restrict",
    "lift-restriction": "lift",
    "hold": "hold",
    "lift-hold": "lift",
}


def _served(request: Request, who: Principal) -> MemoryContext:
    return served_context(context(request), who)


def _person_page(
    request: Request,
    who: Principal,
    user_id: str,
    *,
    message: str | None = None,
    error: str | None = None,
    status: Any = None,
    status_code: int = 200,
) -> Response:
    ctx = _served(request, who)
    return render(
        request,
        "person.html",
        who,
        status_code=status_code,
        person=dpo.look_up(ctx, user_id),
        user_id=user_id,
        message=message,
        error=error,
        erasure=status,
        restriction_grounds=rights.RESTRICTION_GROUNDS,
        hold_grounds=rights.HOLD_GROUNDS,
        confirmations=CONFIRMATIONS,
    )


def _checked(request: Request, who: Principal, form: PersonForm, action: str) -> None:
    allow(who, "operator")
    sessions.check_csrf(request, form.csrf)
    word = CONFIRMATIONS[action]
    if form.confirm.strip() != word:
        raise InvalidInputError(f"type “{word}” to confirm")


def _refused(request: Request, who: Principal, user_id: str, error: Exception) -> Response:
    """The person's page, the forms kept, saying why the action was not done."""
    code = 422 if isinstance(error, InvalidInputError) else 409
    return _person_page(request, who, user_id, error=str(error), status_code=code)


@router.get("/people")
def people_form(request: Request, who: Who) -> Response:
    allow(who, "operator")
    return render(request, "person.html", who, person=None, user_id="", message=None, error=None)


@router.post("/people")
def look_up(request: Request, who: Who, csrf: Csrf, user_id: UserId) -> Response:
    allow(who, "operator")
    sessions.check_csrf(request, csrf)
    return _person_page(request, who, user_id.strip())


@router.post("/people/export")
def export_person(request: Request, who: Who, form: Person) -> Response:
    """The person's signed export as a download, recorded in the register."""
    try:
        _checked(request, who, form, "export")
        _, exported = dpo.export_for(
            _served(request, who),
            form.user_id,
            reference=form.reference,
            actor_id=acting_actor(who),
        )
    except InvalidInputError as e:
        return _refused(request, who, form.user_id, e)
    return json_download(exported, "oblivio-subject-export.json")


@router.post("/people/forget")
def forget_person(request: Request, who: Who, form: Person) -> Response:
    try:
        _checked(request, who, form, "forget")
        status = dpo.forget_for(
            _served(request, who),
            form.user_id,
            reference=form.reference,
            actor_id=acting_actor(who),
            wait=True,
        )
    except (InvalidInputError, ConflictError) as e:
        return _refused(request, who, form.user_id, e)
    message = f"Erasure request {status.status}."
    return _person_page(request, who, form.user_id, message=message, status=status)


def _restrict(ctx: MemoryContext, user: str, ground: str, reference: str, actor: str) -> str:
    dpo.restrict(ctx, user, ground=ground, reference=reference, actor_id=actor)
    return "Processing is restricted."


def _lift_restriction(
    ctx: MemoryContext, user: str, ground: str, reference: str, actor: str
) -> str:
    dpo.lift_restriction(ctx, user, reference=reference, actor_id=actor)
    return "The restriction is lifted."


def _hold(ctx: MemoryContext, user: str, ground: str, reference: str, actor: str) -> str:
    dpo.place_hold(ctx, user, ground=ground, reference=reference, actor_id=actor)
    return "A legal hold is in place."


def _lift_hold(ctx: MemoryContext, user: str, ground: str, reference: str, actor: str) -> str:
    dpo.lift_hold(ctx, user, reference=reference, actor_id=actor)
    return "The legal hold is lifted."


#: The actions that change a person's state and answer with their page (the export
#: answers with a download, the forget with its certificate: routes of their own above).
STATE_ACTIONS: dict[str, Callable[[MemoryContext, str, str, str, str], str]] = {
    "restrict": _restrict,
    "lift-restriction": _lift_restriction,
    "hold": _hold,
    "lift-hold": _lift_hold,
}


@router.post("/people/{action}")
def change_state(
    request: Request,
    action: str,
    who: Who,
    form: Person,
    ground: Annotated[str, Form()] = "",
) -> Response:
    """Restrict, lift the restriction, hold or lift the hold: the person's page says
    what happened (or, with the forms kept, why it was not done)."""
    run = STATE_ACTIONS.get(action)
    if run is None:
        raise NotFoundError("no such action")
    try:
        _checked(request, who, form, action)
        ctx = _served(request, who)
        message = run(ctx, form.user_id, ground, form.reference, acting_actor(who))
    except (InvalidInputError, ConflictError, NotFoundError) as e:
        return _refused(request, who, form.user_id, e)
    return _person_page(request, who, form.user_id, message=message)


# -- the register -----------------------------------------------------------------------


@dataclass(frozen=True)
class RegisterQuery:
    """The register page's filters (query parameters of the page and its export)."""

    kind: str = ""
    status: str = ""
    overdue: bool = False

    def chosen(self) -> dict[str, Any]:
        """As ``oblivio.memory.dpo`` takes them (an empty choice is none)."""
        return {
            "kind": self.kind or None,
            "status": self.status or None,
            "overdue_only": self.overdue,
        }


Register = Annotated[RegisterQuery, Depends()]


@router.get("/register")
def register_page(
    request: Request,
    who: Who,
    wanted: Register,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> Response:
    allow(who, "operator", "auditor")
    listing = dpo.register(_served(request, who), page=page, **wanted.chosen())
    return render(
        request,
        "register.html",
        who,
        listing=listing,
        filters=asdict(wanted),
        kinds=rights.REQUEST_KINDS,
        statuses=rights.REQUEST_STATUSES,
    )


@router.get("/register/export")
def register_export(request: Request, who: Who, wanted: Register, format: str = "csv") -> Response:
    allow(who, "operator", "auditor")
    text = dpo.export_register(_served(request, who), format=format, **wanted.chosen())
    media = "text/csv" if format == "csv" else "application/json"
    return secured(
        Response(
            text,
            media_type=media,
            headers={"Content-Disposition": f'attachment; filename="oblivio-register.{format}"'},
        )
    )
