"""Signing in to the console: sessions, cookies, CSRF tokens and the limit on
failed sign-ins.

The cookie carries a random session token and nothing else; it is HttpOnly,
SameSite=Strict, scoped to ``/console`` and Secure whenever the request came
over TLS.  Every state-changing form carries a CSRF token derived from the
session token, which a page of another origin can neither read nor compute.
The sign-in form, made before there is a session, is protected the same way
by a short-lived random cookie it must echo (the double-submit pattern).
The ``/v1`` API never reads these cookies: it knows only bearer keys.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta

from fastapi import Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials
from starlette.exceptions import HTTPException

from appdata import console_sessions
from appdata.apikeys import Principal
from oblivio.http.auth import authenticated, context
from oblivio.http.errors import checks_query, refuse_unknown_query

COOKIE = "oblivio_console"
SIGNIN_COOKIE = "oblivio_console_signin"
COOKIE_PATH = "/console"
DEFAULT_IDLE_MINUTES = 30.0
#: A session's last-seen time is rewritten at most this often.
TOUCH_GRANULARITY = timedelta(seconds=30)


class SignInRequiredError(Exception):
    """No live session: the console answers with the sign-in page."""


class CsrfError(HTTPException):
    def __init__(self) -> None:
        super().__init__(403, "the form is stale or came from another site; reload the page")


def idle_timeout(request: Request) -> timedelta:
    minutes: float = getattr(request.app.state, "console_idle_minutes", DEFAULT_IDLE_MINUTES)
    return timedelta(minutes=minutes)


def sign_in(request: Request, api_key: str) -> str:
    """Open a session for a valid API key; its token.

    The key is checked by the very function the API's bearer authentication
    uses, so a revoked, expired or unknown key fails here exactly as it fails
    there (``HTTPException`` 401), and failed sign-ins count against the same
    per-address budget of failed authentications (429 once it is spent).
    """
    bearer = HTTPAuthorizationCredentials(scheme="Bearer", credentials=api_key)
    who = authenticated(request, bearer)
    memory = context(request)
    with memory.store.transaction() as tx:
        console_sessions.end_idle(tx.connection, memory.clock(), idle_timeout(request))
        return console_sessions.open_session(tx.connection, who, memory.clock())


@checks_query
def signed_in(request: Request) -> Principal:
    """The principal of the request's session; ``SignInRequiredError`` without one.

    A page view only reads the session; it writes (to end it, or to move its
    last-seen time) only when there is something to write, at most every
    ``TOUCH_GRANULARITY``: a write per click would queue every page behind
    SQLite's single writer.
    """
    token = request.cookies.get(COOKIE)
    if not token:
        raise SignInRequiredError()
    memory = context(request)
    now = memory.clock()
    with memory.store.reading() as view:
        session = console_sessions.find(view.connection, token)
    if session is None:
        raise SignInRequiredError()
    if session.ended(now, idle_timeout(request)):
        with memory.store.transaction() as tx:
            console_sessions.end(tx.connection, token)
        raise SignInRequiredError()
    if session.last_seen_at <= now - TOUCH_GRANULARITY:
        with memory.store.transaction() as tx:
            console_sessions.touch(tx.connection, token, now)
    refuse_unknown_query(request)  # to the signed in only
    return session.principal


def sign_out(request: Request) -> None:
    token = request.cookies.get(COOKIE)
    if token:
        memory = context(request)
        with memory.store.transaction() as tx:
            console_sessions.end(tx.connection, token)


def set_session_cookie(request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        COOKIE,
        token,
        path=COOKIE_PATH,
        httponly=True,
        secure=request.url.scheme == "https",
        samesite="strict",
    )
    response.delete_cookie(SIGNIN_COOKIE, path=COOKIE_PATH)


def clear_session_cookie(response: Response) -> None:
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")


# -- CSRF -------------------------------------------------------------------------------


def csrf_token(request: Request) -> str:
    """The CSRF token of the request's session."""
    token = request.cookies.get(COOKIE, "")
    return hmac.new(b"oblivio/console/csrf", token.encode(), hashlib.sha256).hexdigest()


def check_csrf(request: Request, submitted: str) -> None:
    if not request.cookies.get(COOKIE) or not hmac.compare_digest(
        submitted.encode(), csrf_token(request).encode()
    ):
        raise CsrfError()


def signin_page_nonce(request: Request, response: Response, nonce: str) -> None:
    """Set ``nonce`` (from :func:`new_nonce`, also put in the sign-in form) as a cookie."""
    response.set_cookie(
        SIGNIN_COOKIE,
        nonce,
        max_age=600,
        path=COOKIE_PATH,
        httponly=True,
        secure=request.url.scheme == "https",
        samesite="strict",
    )


def new_nonce() -> str:
    return secrets.token_urlsafe(24)


def check_signin_nonce(request: Request, submitted: str) -> None:
    cookie = request.cookies.get(SIGNIN_COOKIE, "")
    if not cookie or not hmac.compare_digest(submitted.encode(), cookie.encode()):
        raise CsrfError()
