"""The one place where errors become HTTP statuses.

Other owners' ids answer exactly like missing ids (404), so existence never
leaks; unexpected errors become a bare 500 whose details stay in the logs.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

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

# Checked in order: the first matching class decides.
STATUS_BY_ERROR: list[tuple[type[Exception], int]] = [
    (NotFoundError, 404),
    (ConflictError, 409),
    (CertificateVerificationError, 422),
    (InvalidInputError, 422),
    (KeyUnavailableError, 404),
    (OperationalError, 503),
]


def problem(status: int, title: str, detail: str) -> JSONResponse:
    return JSONResponse(
        {"type": "about:blank", "title": title, "status": status, "detail": detail},
        status_code=status,
        media_type="application/problem+json",
    )


async def oblivio_error(request: Request, error: Exception) -> JSONResponse:
    for error_type, status in STATUS_BY_ERROR:
        if isinstance(error, error_type):
            return problem(status, type(error).__name__, str(error))
    log.exception("unmapped error", exc_info=error)
    return problem(500, "InternalError", "the server could not complete the request")


def install(app: FastAPI) -> None:
    app.add_exception_handler(OblivioError, oblivio_error)
    app.add_exception_handler(CertificateVerificationError, oblivio_error)
