"""Building the FastAPI application around a memory context."""

from __future__ import annotations

import json
import logging
import random
import re
import time
from typing import Any

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import PlainTextResponse
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oblivio import __version__, console
from oblivio.http import (
    compliance_routes,
    dpo_routes,
    errors,
    key_routes,
    memory_routes,
    rebuild_routes,
    schemas,
    subject_routes,
)
from oblivio.http.auth import Operator, context
from oblivio.http.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from oblivio.http.metrics import Metrics
from oblivio.http.throttle import FailedAuthThrottle
from oblivio.memory.context import MemoryContext
from oblivio.memory.health import LagReport
from oblivio.settings import Settings

access_log = logging.getLogger("oblivio.access")


def create_app(ctx: MemoryContext, settings: Settings | None = None) -> FastAPI:
    """The HTTP API over ``ctx``; OpenAPI is published at ``/openapi.json``.

    ``settings`` bound what a request may send (default: ``Settings()``'s limits).
    """
    limits = settings or Settings()
    # /docs and /redoc load Swagger UI and ReDoc from fastapi-offline's package
    # data, served here, not from a CDN: they work without a network.
    app = FastAPIOffline(
        dependencies=[Depends(errors.known_query_only)],
        title="oblivio",
        version=__version__,
        description="An event-sourced memory store for AI agents that can prove it forgot.",
    )
    app.state.context = ctx
    app.state.auth_throttle = FailedAuthThrottle(limits.auth_failures_per_minute)
    app.include_router(memory_routes.router)
    app.include_router(subject_routes.router)
    app.include_router(compliance_routes.router)
    app.include_router(dpo_routes.router)
    app.include_router(key_routes.router)
    app.include_router(rebuild_routes.router)
    console.install(app, idle_minutes=ctx.console_idle_minutes if ctx else 30.0)
    errors.install(app)
    lag_report = LagReport()
    metrics = Metrics(ctx, lag_report)
    app.add_middleware(BodyLimit, max_bytes=limits.max_request_bytes)
    app.add_middleware(RequestLog, metrics=metrics)

    @app.get(
        "/metrics",
        tags=["operations"],
        response_class=PlainTextResponse,
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            **errors.problem_responses(401, 403, 429, 503),
        },
    )
    def prometheus_metrics(caller: Operator) -> Response:
        """Prometheus metrics of this process and the store (operator keys only); a
        namespaced key gets its namespace's erasure figures alone."""
        return Response(metrics.exposition(caller.ctx), media_type=METRICS_CONTENT_TYPE)

    @app.get("/v1/health", response_model=schemas.HealthOut, tags=["operations"])
    def health(request: Request) -> schemas.HealthOut:
        """Database reachability and how far the vector state lags behind the log."""
        memory = context(request)
        lag = lag_report(memory)
        return schemas.HealthOut(
            status="ok", database="ok", backend=memory.store.backend_name, projection_lag=lag
        )

    _publish_problem_schema(app)
    return app


def _publish_problem_schema(app: FastAPI) -> None:
    """Add the Problem model to the published components (routes refer to it), and
    publish optional query, path and header parameters without ``null``: such a
    parameter is absent or has a value, and ``?user_id=null`` is the text "null"."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components["Problem"] = errors.Problem.model_json_schema()
            for item in schema.get("paths", {}).values():
                for operation in item.values():
                    for parameter in operation.get("parameters", ()):
                        parameter["schema"] = _without_null(parameter["schema"])
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    choices = [c for c in schema.get("anyOf", ()) if c != {"type": "null"}]
    if len(choices) != 1 or len(schema["anyOf"]) != 2:
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf" and not (k == "default" and v is None)}
    return {**choices[0], **rest}


class RequestLog:
    """One structured JSON log line per request, tagged with a request id.

    A plain ASGI middleware rather than Starlette's ``BaseHTTPMiddleware``,
    which runs the app in a task of its own and streams the response through a
    memory channel: a fixed cost on every request.  The line names the route
    template, not the raw path: paths carry user ids, which must not outlive a
    forget in the logs.
    """

    def __init__(self, app: ASGIApp, metrics: Metrics | None = None) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        started = time.perf_counter()
        status: int | None = None  # set once the response has started

        async def tagged(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [
                    *message.get("headers", ()),
                    (b"x-request-id", request_id.encode("latin-1")),
                ]
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, tagged)
        except ClientDisconnect:
            # The client went away before the request was read: nothing failed
            # here and there is no one to answer.
            status = CLIENT_CLOSED_REQUEST
        except Exception:
            errors.log.exception("request %s failed", request_id)
            if status is not None:  # too late for a problem response: drop the connection
                raise
            failure = errors.problem(
                500, "InternalError", "the server could not complete the request"
            )
            await failure(scope, receive, tagged)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            seconds = time.perf_counter() - started
            final = 500 if status is None else status
            if access_log.isEnabledFor(logging.INFO):  # else no line to build
                access_log.info(_access_line(request_id, scope["method"], route, final, seconds))
            if self.metrics is not None:
                self.metrics.observe(scope["method"], route, final, seconds)


def _access_line(request_id: str, method: str, route: str, status: int, seconds: float) -> str:
    """The access log's JSON line.  ``json.dumps``, not orjson: orjson would save about
    2.6 µs of a request's 1 ms and drop the spaces log searches may match on."""
    line = {
        "request_id": request_id,
        "method": method,
        "route": route,
        "status": status,
        "ms": round(seconds * 1000, 2),
    }
    return json.dumps(line)


#: The access log's status for a request its client abandoned (nginx's 499).
CLIENT_CLOSED_REQUEST = 499
#: A caller's request id is copied into the log and the response only if it
#: is short and visible ASCII; anything else gets an id of our own.
_CALLER_REQUEST_ID = re.compile(rb"[\x21-\x7e]{1,128}")


class BodyLimit:
    """Request bodies of at most ``max_bytes``, counted while they are read.

    A body announced larger (``Content-Length``) is refused before a byte of
    it is read; one that grows past the limit as it streams in is refused at
    that moment, the rest never read.  Both answer 413 (a problem response,
    like every error) and close the connection, so the server does not go on
    reading what was refused.  Starlette's own limiter answers in plain text.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _announced_length(scope) > self.max_bytes:
            await self._refusal()(scope, receive, send)
            return
        read = 0

        async def counted() -> Message:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > self.max_bytes:
                raise BodyTooLargeError(self.max_bytes)
            return message

        await self.app(scope, counted, send)

    def _refusal(self) -> Response:
        return errors.problem(
            413,
            "PayloadTooLarge",
            f"the request body is larger than {self.max_bytes} bytes",
            {"Connection": "close"},
        )


class BodyTooLargeError(HTTPException):
    """Raised from ``receive``: the app's handlers answer it, as for any HTTP error."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(
            413, f"the request body is larger than {max_bytes} bytes", {"Connection": "close"}
        )


def _announced_length(scope: Scope) -> int:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


def _request_id(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"x-request-id" and _CALLER_REQUEST_ID.fullmatch(value):
            return bytes(value).decode("ascii")
    # 128 random bits as 32 hex digits, like uuid4().hex.  Not os.urandom: its system
    # call lets go of the GIL, and the event loop then queues behind the thread pool's
    # stores to take it back (a tenth of the loop's time on POST /v1/events, py-spy).
    # A request id correlates log lines; it is no secret, so Python's generator (seeded
    # from the system's, again in each forked worker) serves.
    return f"{random.getrandbits(128):032x}"
