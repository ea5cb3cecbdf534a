"""What a remote call sends, when it is sent again, and which error an answer becomes.

The retry rule, in full: a request the server never received (the connection
could not be opened) is sent again whatever it is; any other failure (a timeout
or a dropped connection after sending, or a 502/503/504) is retried only for a
request marked ``retry_safe``: a read, an erasure (asking again answers with the
earlier request), a correction (an exact repeat is a no-op) or a write carrying
an idempotency key the server honours (``request_id``, ``Idempotency-Key``).
A store without a ``request_id`` is therefore sent once: repeating it after a
lost answer could store the memory twice.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from certificates import CertificateVerificationError
from eventstore.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    OblivioError,
    OperationalError,
    PayloadTooLargeError,
)
from oblivio.errors import ForbiddenError, ServerError, UnauthorizedError

PROBLEM = "application/problem+json"


@dataclass(frozen=True)
class Request:
    """One HTTP request of a remote call; ``body`` is already JSON-compatible."""

    method: str
    path: str
    params: Mapping[str, Any] = field(default_factory=dict)
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    retry_safe: bool = False

    def build(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        params = {k: v for k, v in self.params.items() if v is not None}
        return client.build_request(
            self.method,
            self.path,
            params=params,
            json=self.body,
            headers=dict(self.headers),
        )


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is sent again (see the module docstring).

    ``attempts`` counts the first one; the pause before attempt n+1 is
    ``backoff * 2**(n-1)`` seconds, at most ``max_backoff``, or the server's
    ``Retry-After`` when it names a shorter or equal wait.
    """

    attempts: int = 3
    backoff: float = 0.1
    max_backoff: float = 2.0
    statuses: frozenset[int] = frozenset({502, 503, 504})

    def pause(
        self, request: Request, attempt: int, outcome: httpx.Response | Exception
    ) -> float | None:
        """Seconds to wait before sending ``request`` again after ``attempt`` (1-based)
        ended in ``outcome``; ``None``: do not send it again."""
        if attempt >= self.attempts or not self._retryable(request, outcome):
            return None
        wait = min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1))
        if isinstance(outcome, httpx.Response):
            asked = _seconds(outcome.headers.get("Retry-After"))
            if asked is not None and asked <= self.max_backoff:
                wait = asked
        return wait

    def _retryable(self, request: Request, outcome: httpx.Response | Exception) -> bool:
        if isinstance(outcome, httpx.ConnectError | httpx.ConnectTimeout):
            return True  # nothing reached the server
        if not request.retry_safe:
            return False
        if isinstance(outcome, httpx.Response):
            return outcome.status_code in self.statuses
        return isinstance(outcome, httpx.TransportError)


def _seconds(value: str | None) -> float | None:
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: fall back to the backoff


NO_RETRIES = RetryPolicy(attempts=1)


def unreachable(error: httpx.TransportError) -> OperationalError:
    """The typed error of a request that got no answer."""
    sent = (
        ""
        if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout)
        else (" (the request was sent: it may have been applied)")
    )
    return OperationalError(f"the oblivio server did not answer{sent}: {type(error).__name__}")


# -- answers to errors ----------------------------------------------------------------------

#: The error an answer raises when its title names no exception of oblivio's tree.
BY_STATUS: dict[int, type[OblivioError]] = {
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: InvalidInputError,
    429: OperationalError,
    502: OperationalError,
    503: OperationalError,
    504: OperationalError,
}


def error_of(response: httpx.Response) -> Exception:
    """The exception the facade raises for what this error answer reports.

    The server names oblivio's own errors in the problem's ``title`` (their
    class name, docs/http.md); titles of the HTTP layer (``NotFound``,
    ``InvalidInput``, …) and other answers map by status.
    """
    title, detail = _problem(response)
    known = _errors_by_name().get(title)
    if known is None:
        return BY_STATUS.get(response.status_code, ServerError)(detail or None)
    # Built like the server's, from its message alone: some errors take other
    # constructor arguments (the expected version, a verification reason).
    error = known.__new__(known)
    Exception.__init__(error, detail)
    return error


def _problem(response: httpx.Response) -> tuple[str, str]:
    if response.headers.get("content-type", "").split(";")[0] == PROBLEM:
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            return str(body.get("title", "")), str(body.get("detail", ""))
    return "", f"HTTP {response.status_code} from the oblivio server"


def _subclasses(root: type[Exception]) -> Iterator[type[Exception]]:
    yield root
    for sub in root.__subclasses__():
        yield from _subclasses(sub)


def _errors_by_name() -> dict[str, type[Exception]]:
    # Walked on each error answer, so classes imported since are found too.
    roots: tuple[type[Exception], ...] = (OblivioError, CertificateVerificationError)
    return {cls.__name__: cls for root in roots for cls in _subclasses(root)}
