"""Building the FastAPI application around a memory context."""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from oblivio import __version__, console
from oblivio.http import compliance_routes, errors, key_routes, memory_routes, schemas
from oblivio.http.auth import context
from oblivio.memory.context import MemoryContext
from oblivio.memory.health import LagReport

access_log = logging.getLogger("oblivio.access")


def create_app(ctx: MemoryContext) -> FastAPI:
    """The HTTP API over ``ctx``; OpenAPI is published at ``/openapi.json``."""
    app = FastAPI(
        title="oblivio",
        version=__version__,
        description="An event-sourced memory store for AI agents that can prove it forgot.",
    )
    app.state.context = ctx
    app.include_router(memory_routes.router)
    app.include_router(compliance_routes.router)
    app.include_router(key_routes.router)
    console.install(app, idle_minutes=ctx.console_idle_minutes if ctx else 30.0)
    errors.install(app)
    app.add_middleware(RequestLog)
    lag_report = LagReport()

    @app.get("/v1/health", response_model=schemas.HealthOut, tags=["operations"])
    def health(request: Request) -> schemas.HealthOut:
        """Database reachability and how far the vector state lags behind the log."""
        memory = context(request)
        lag = lag_report(memory)
        return schemas.HealthOut(
            status="ok", database="ok", backend=memory.store.backend.name, projection_lag=lag
        )

    _publish_problem_schema(app)
    return app


def _publish_problem_schema(app: FastAPI) -> None:
    """Add the Problem model to the published components (routes refer to it)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components["Problem"] = errors.Problem.model_json_schema()
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


class RequestLog:
    """One structured JSON log line per request, tagged with a request id.

    A plain ASGI middleware rather than Starlette's ``BaseHTTPMiddleware``,
    which runs the app in a task of its own and streams the response through a
    memory channel: a fixed cost on every request.  The line names the route
    template, not the raw path: paths carry user ids, which must not outlive a
    forget in the logs.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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
        except Exception:
            errors.log.exception("request %s failed", request_id)
            if status is not None:  # too late for a problem response: drop the connection
                raise
            failure = errors.problem(
                500, "InternalError", "the server could not complete the request"
            )
            await failure(scope, receive, tagged)
        finally:
            route = scope.get("route")
            access_log.info(
                json.dumps(
                    {
                        "request_id": request_id,
                        "method": scope["method"],
                        "route": getattr(route, "path", "unmatched"),
                        "status": 500 if status is None else status,
                        "ms": round((time.perf_counter() - started) * 1000, 2),
                    }
                )
            )


def _request_id(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"x-request-id" and value:
            return bytes(value).decode("latin-1")
    # 128 random bits as 32 hex digits, like uuid4().hex without building a UUID.
    return os.urandom(16).hex()
