"""Building the FastAPI application around a memory context."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response

from oblivio import __version__
from oblivio.http import compliance_routes, errors, memory_routes, schemas
from oblivio.http.auth import context
from oblivio.memory.context import MemoryContext
from oblivio.memory.health import projection_lag

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
    errors.install(app)
    app.middleware("http")(_request_log)

    @app.get("/v1/health", response_model=schemas.HealthOut, tags=["operations"])
    def health(request: Request) -> schemas.HealthOut:
        """Database reachability and how far the vector state lags behind the log."""
        memory = context(request)
        lag = projection_lag(memory)
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


async def _request_log(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """One structured JSON log line per request, tagged with a request id.

    The line names the route template, not the raw path: paths carry user ids,
    which must not outlive a forget in the logs.
    """
    request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
    started = time.perf_counter()
    try:
        response = await call_next(request)
    except Exception:
        errors.log.exception("request %s failed", request_id)
        response = errors.problem(500, "InternalError", "the server could not complete the request")
    response.headers["X-Request-ID"] = request_id
    route = request.scope.get("route")
    access_log.info(
        json.dumps(
            {
                "request_id": request_id,
                "method": request.method,
                "route": getattr(route, "path", "unmatched"),
                "status": response.status_code,
                "ms": round((time.perf_counter() - started) * 1000, 2),
            }
        )
    )
    return response
