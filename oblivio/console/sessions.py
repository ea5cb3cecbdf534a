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
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import timedelta

from fastapi import Request
from fastapi.responses import Response
from fastapi.security import HTTPAuthorizationCredentials
from starlette.exceptions import HTTPException

from eventstore import console_sessions
from eventstore.apikeys import Principal
from oblivio.http.auth import authenticated, context

COOKIE = "oblivio_console"
SIGNIN_COOKIE = "oblivio_console_signin"
COOKIE_PATH = "/console"
DEFAULT_IDLE_MINUTES = 30.0
#: Failed sign-ins allowed per client address within ``FAILURE_WINDOW`` seconds.
MAX_FAILURES = 5
FAILURE_WINDOW = 300.0
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


def sign_in(request: Request, api_key: str) -> str | None:
    """Open a session for a valid API key; its token, or None for a bad key.

    The key is checked by the very function the API's bearer authentication
    uses, so a revoked or unknown key fails here exactly as it fails there.
    """
    try:
        bearer = HTTPAuthorizationCredentials(scheme="Bearer", credentials=api_key)
        who = authenticated(request, bearer)
    except HTTPException:
        return None
    memory = context(request)
    with memory.store.transaction() as tx:
        console_sessions.end_idle(tx.connection, memory.clock(), idle_timeout(request))
        return console_sessions.open_session(tx.connection, who, memory.clock())


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


# -- failed sign-ins ----------------------------------------------------------------------


class FailureLimit:
    """At most ``limit`` failed sign-ins per client address per ``window`` seconds.

    Kept per process: a guesser spread over N API processes gets N times the
    budget, still a handful of guesses a minute against 192-bit secrets.
    """

    def __init__(
        self,
        limit: int = MAX_FAILURES,
        window: float = FAILURE_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, deque[float]] = {}

    def retry_after(self, client: str) -> float:
        """Seconds until ``client`` may try again; 0 when it may now."""
        with self._lock:
            recent = self._recent(client)
            if len(recent) < self.limit:
                return 0.0
            return max(0.0, recent[0] + self.window - self._clock())

    def failed(self, client: str) -> None:
        with self._lock:
            self._recent(client).append(self._clock())

    def _recent(self, client: str) -> deque[float]:
        now = self._clock()
        if len(self._failures) > 10_000:  # forget clients whose failures have all aged out
            self._failures = {
                c: q for c, q in self._failures.items() if q and q[-1] > now - self.window
            }
        recent = self._failures.setdefault(client, deque())
        while recent and recent[0] <= now - self.window:
            recent.popleft()
        return recent
