"""The console's plumbing: its router, HTML rendering, security headers and
the way errors become pages.

Pages are Jinja2 templates rendered on the server (autoescaped); the only
scripts are two small files in ``static/`` (certificate verification and job
progress), served by this package, so the console works offline and the
Content-Security-Policy allows nothing from another origin.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

import jinja2
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from appdata.apikeys import Principal
from certificates import CertificateVerificationError
from eventstore.errors import InvalidInputError, KeyUnavailableError, NotFoundError
from oblivio import json_text
from oblivio.console.sessions import SignInRequiredError, csrf_token, signed_in

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
PREFIX = "/console"

environment = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
)
#: Times as the API writes them (``oblivio.json_text``).
environment.filters["iso"] = json_text.iso

SECURITY_HEADERS = {
    # Nothing from another origin, no inline script, no framing.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

#: The pages each principal's navigation offers: (path, label).
NAVIGATION: dict[str, list[tuple[str, str]]] = {
    "operator": [
        ("/console/people", "People"),
        ("/console/register", "Register"),
        ("/console/requests", "Erasure requests"),
        ("/console/audit", "Audit trail"),
        ("/console/health", "Health"),
        ("/console/keys", "Keys"),
        ("/console/verify", "Verify a certificate"),
    ],
    "auditor": [
        ("/console/register", "Register"),
        ("/console/requests", "Erasure requests"),
        ("/console/audit", "Audit trail"),
        ("/console/health", "Health"),
        ("/console/verify", "Verify a certificate"),
    ],
    "user": [
        ("/console/my", "My data"),
        ("/console/requests", "My requests"),
        ("/console/verify", "Verify a certificate"),
    ],
}


def secured(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def json_download(body: Any, filename: str) -> Response:
    """``body`` as an indented JSON file the browser saves as ``filename``."""
    return secured(
        Response(
            json.dumps(body, indent=2),
            media_type="application/json",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )
    )


def render(
    request: Request,
    template: str,
    who: Principal | None = None,
    *,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
    **values: Any,
) -> HTMLResponse:
    """A page: ``template`` with the signed-in principal, its navigation and CSRF token."""
    html = environment.get_template(template).render(
        who=who,
        nav=NAVIGATION.get(who.kind, []) if who else [],
        csrf=csrf_token(request) if who else "",
        path=request.url.path,
        **values,
    )
    response = HTMLResponse(html, status_code=status_code, headers=headers)
    secured(response)
    return response


def allow(who: Principal, *kinds: str) -> None:
    """403 unless ``who`` is one of ``kinds``."""
    if who.kind not in kinds:
        raise HTTPException(403, f"this page is not open to {who.kind} keys")


def redirect(path: str) -> Response:
    return secured(RedirectResponse(path, status_code=303))


Endpoint = Callable[[Request], Coroutine[Any, Any, Response]]


class ConsoleRoute(APIRoute):
    """A console route: what its handler or dependencies raise becomes a page.

    The API's handlers answer JSON problems; a person in a browser gets the
    same status with an HTML page, and an expired session leads to sign-in.
    Missing and foreign ids give the same "not available" page, so no page
    reveals whether another owner's id exists.
    """

    def get_route_handler(self) -> Endpoint:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except SignInRequiredError:
                return redirect(f"{PREFIX}/signin")
            except (NotFoundError, KeyUnavailableError):
                return _error_page(request, 404, "Not available", "There is nothing here to show.")
            except (InvalidInputError, CertificateVerificationError) as e:
                return _error_page(request, 422, "Not accepted", str(e))
            except RequestValidationError:
                return _error_page(request, 422, "Not accepted", "A parameter is malformed.")
            except HTTPException as e:
                # A refusal to someone signed in keeps their navigation, the way back
                # to their own first page and the sign-out button.
                who = _still_signed_in(request) if e.status_code == 403 else None
                return _error_page(
                    request, e.status_code, "Not allowed", str(e.detail), e.headers, who
                )

        return route


def _still_signed_in(request: Request) -> Principal | None:
    try:
        return signed_in(request)
    except (SignInRequiredError, HTTPException):
        return None


#: Each principal's first page, where an error page leads back to.
HOME = {"operator": "/console/requests", "auditor": "/console/audit", "user": "/console/my"}


def _error_page(
    request: Request,
    status: int,
    title: str,
    detail: str,
    headers: Mapping[str, str] | None = None,
    who: Principal | None = None,
) -> HTMLResponse:
    return render(
        request,
        "error.html",
        who,
        status_code=status,
        headers=headers,
        title=title,
        detail=detail,
        home=HOME[who.kind] if who else PREFIX,
    )
