"""The one place where errors become HTTP responses: ``application/problem+json`` (RFC 9457).

Other owners' ids answer exactly like missing ids (404), so existence never
leaks; validation errors never echo the offending input (it may be personal,
or not even encodable); unexpected errors become a bare 500 whose details
stay in the logs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fastapi import APIRouter, FastAPI, Request
from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match, Mount

from certificates import CertificateVerificationError
from eventstore.errors import (
    ConflictError,
    InvalidInputError,
    KeyUnavailableError,
    NotFoundError,
    OblivioError,
    OperationalError,
)

log = logging.getLogger("oblivio.http")
F = TypeVar("F", bound=Callable[..., Any])

PROBLEM = "application/problem+json"

# Checked in order: the first matching class decides.
STATUS_BY_ERROR: list[tuple[type[Exception], int]] = [
    (NotFoundError, 404),
    (ConflictError, 409),
    (CertificateVerificationError, 422),
    (InvalidInputError, 422),
    (KeyUnavailableError, 404),
    (OperationalError, 503),
]

TITLES = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "PayloadTooLarge",
    422: "InvalidInput",
    429: "TooManyRequests",
    431: "RequestHeaderFieldsTooLarge",
    500: "InternalError",
    503: "Unavailable",
}


class Problem(BaseModel):
    """An error (RFC 9457)."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI declarations of the problem responses a route can give."""
    schema = {"$ref": "#/components/schemas/Problem"}
    return {
        status: {
            "description": TITLES.get(status, "Error"),
            "content": {PROBLEM: {"schema": schema}},
        }
        for status in statuses
    }


#: The problems a route of the API may answer besides its own answers: no or a bad key,
#: a key not allowed to, not found, a conflict, invalid input, throttled, unavailable.
API_PROBLEMS = (401, 403, 404, 409, 422, 429, 503)


def api_router(prefix: str, tag: str, statuses: Sequence[int] = API_PROBLEMS) -> APIRouter:
    """A router of the API: routes under ``prefix``, listed under ``tag``, each declaring
    the problem responses of ``statuses``."""
    return APIRouter(prefix=prefix, tags=[tag], responses=problem_responses(*statuses))


def problem(
    status: int, title: str, detail: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    body = Problem(title=title, status=status, detail=detail).model_dump()
    return JSONResponse(body, status_code=status, media_type=PROBLEM, headers=headers)


async def oblivio_error(request: Request, error: Exception) -> JSONResponse:
    for error_type, status in STATUS_BY_ERROR:
        if isinstance(error, error_type):
            return problem(status, type(error).__name__, str(error))
    log.exception("unmapped error", exc_info=error)
    return problem(500, "InternalError", "the server could not complete the request")


async def http_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, StarletteHTTPException)
    if error.status_code == 400 and error.__cause__ is not None:
        return _unreadable_body(error.__cause__)
    headers = dict(error.headers or {})
    if error.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request))
    return problem(
        error.status_code, TITLES.get(error.status_code, "Error"), str(error.detail), headers
    )


#: The methods a 405's ``Allow`` header may name.
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
#: What the app's mounts (static files: the console's, the offline API docs') answer.
STATIC_FILE_METHODS = ["GET", "HEAD"]


def allowed_methods(request: Request) -> list[str]:
    """Every method some route answers at the request's path.  Starlette's 405 names
    only those of the first route whose path matched: one of several (``/v1/events``
    is both GET and POST)."""
    scope = request.scope
    # Matched from the top, whichever mount or router raised the 405.
    top = {**scope, "root_path": scope.get("app_root_path", scope.get("root_path", ""))}
    routes = [r for r in request.app.router.routes if not isinstance(r, Mount)]
    routed = [
        method
        for method in METHODS
        if any(route.matches({**top, "method": method})[0] is Match.FULL for route in routes)
    ]
    return routed or STATIC_FILE_METHODS


def _unreadable_body(cause: BaseException) -> JSONResponse:
    """FastAPI answers 400 to any failure reading a JSON body; oblivio's one
    rule is 422 for a body that is not UTF-8 JSON of bounded depth, on every
    route, and no answer at all to a client that went away."""
    if isinstance(cause, ClientDisconnect):
        raise cause  # the request log records it; there is no one to answer
    if isinstance(cause, UnicodeDecodeError):
        return problem(422, "InvalidEncodingError", "the body is not valid UTF-8")
    if isinstance(cause, RecursionError):
        return problem(422, "InvalidInput", "the body's JSON is nested too deeply")
    return problem(422, "InvalidInput", "the body is not valid JSON")


async def validation_error(request: Request, error: Exception) -> JSONResponse:
    assert isinstance(error, RequestValidationError)
    # Name where and what, never the input itself.
    parts = [
        f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', 'invalid')}"
        for e in error.errors()
    ]
    detail = "; ".join(parts)[:1000].encode("utf-8", "replace").decode("utf-8")
    return problem(422, "InvalidInput", detail)


def install(app: FastAPI) -> None:
    app.add_exception_handler(OblivioError, oblivio_error)
    app.add_exception_handler(CertificateVerificationError, oblivio_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)


async def known_query_only(request: Request) -> None:
    """A dependency of every route: query parameters the route does not declare are
    refused (422), like unknown body members, instead of silently ignored.

    App dependencies run before the route's own, so on a route that admits callers
    (an API key, a console session) this leaves the check to the admission
    (``checks_query``), which makes it once the caller is known: a request without
    credentials learns 401, not what the route takes.
    """
    dependant = _route_dependant(request)
    if dependant is not None and request.query_params and not _admits(dependant):
        refuse_unknown_query(request)


#: Set on a dependency that admits callers and then calls ``refuse_unknown_query``.
_CHECKS_QUERY = "oblivio_checks_query"


def checks_query(admission: F) -> F:
    """Mark ``admission`` as a dependency that calls ``refuse_unknown_query`` itself."""
    setattr(admission, _CHECKS_QUERY, True)
    return admission


def refuse_unknown_query(request: Request) -> None:
    """422 for query parameters the request's route does not declare."""
    dependant = _route_dependant(request)
    if dependant is None or not request.query_params:
        return
    unknown = set(request.query_params) - _declared_query(dependant)
    if unknown:
        raise RequestValidationError(
            [{"loc": ("query", name), "msg": "Unknown query parameter"} for name in unknown]
        )


def _route_dependant(request: Request) -> Dependant | None:
    dependant: Dependant | None = getattr(request.scope.get("route"), "dependant", None)
    return dependant


def _admits(dependant: Dependant) -> bool:
    """Whether a dependency of ``dependant`` (or of theirs) is a ``checks_query`` admission."""
    return any(
        getattr(sub.call, _CHECKS_QUERY, False) or _admits(sub) for sub in dependant.dependencies
    )


def _declared_query(dependant: Dependant) -> set[str]:
    """The query parameters of a route and of every dependency it has."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _declared_query(sub)
    return names
