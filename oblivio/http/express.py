"""The express lane: the direct routes served from the application's own entry point.

Through FastAPI, a request to ``POST /v1/events`` passes Starlette's error
middleware, FastAPI's OpenTelemetry and body-limit middleware, oblivio's
request log, the exception middleware and the exit stack of dependencies
with ``yield``, then the router, which tries each route in turn, before its
handler runs.  For the hot routes, whose own work is well under a
millisecond, those layers were about a sixth of the server's CPU per
request (docs/benchmarks.md, "The express lane").

``OblivioAPI`` finds a request by its exact method and path among the routes
served by :class:`~oblivio.http.direct.DirectRoute` and runs that route's own
handler, inside the same request log, answering what it raises through the
app's own exception handlers (the ones ``oblivio.http.errors`` installs).
What the lane skips has nothing to do for these routes: they declare no
dependency with ``yield``, the app sets no body limit, and oblivio configures
no OpenTelemetry.  Every other request, and every request under a
``root_path``, takes FastAPI's way.  The routes stay declared on FastAPI, so
the published OpenAPI does not change.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, cast

from fastapi import APIRouter, FastAPI, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from oblivio.http.direct import DirectRoute, Handler

RouteKey = tuple[str, str]


class OblivioAPI(FastAPI):
    """FastAPI, serving the direct routes of some routers in an express lane.

    ``request_log`` wraps the lane as it wraps the rest of the app (added
    with ``add_middleware``), so every request gets its log line and id.
    An app given any other middleware, or a body limit, has no lane: the
    lane must never skip something that was added for every request.
    """

    def __init__(self, *, request_log: Callable[[ASGIApp], ASGIApp], **options: Any) -> None:
        super().__init__(**options)
        self._express_routes: dict[RouteKey, DirectRoute] = {}
        self._request_log = request_log
        self._express_lane = request_log(self._serve_express)
        self._lane_open: bool | None = None  # settled by the first request

    def include_express(self, router: APIRouter) -> None:
        """Include ``router`` (no prefix, no extra dependencies) and put its direct routes
        in the express lane."""
        self.include_router(router)
        for route in router.routes:
            if isinstance(route, DirectRoute) and route.direct_handler is not None:
                for method in route.methods or ():
                    self._express_routes[method, route.path] = route

    def express_route(self, method: str, path: str) -> DirectRoute | None:
        """The route the express lane serves for ``method`` and ``path``, if any."""
        if not self._lane_is_open():
            return None
        return self._express_routes.get((method, path))

    def _lane_is_open(self) -> bool:
        if self._lane_open is None:
            middleware = [m.cls for m in self.user_middleware]
            return middleware == [self._request_log] and self.max_body_size is None
        return self._lane_open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._lane_open is None:
            # Settled once: building the middleware stack, as Starlette does
            # on the first request, makes it refuse any middleware added later.
            if self.middleware_stack is None:
                self.middleware_stack = self.build_middleware_stack()
            self._lane_open = self._lane_is_open()
        if (
            self._lane_open
            and scope["type"] == "http"
            and (scope["method"], scope["path"]) in self._express_routes
            and not (self.root_path or scope.get("root_path"))
        ):
            await self._express_lane(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    async def _serve_express(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self._express_routes[scope["method"], scope["path"]]
        # What Starlette would have set: the request's app and, for the
        # request log, the matched route.
        scope["app"], scope["route"] = self, route
        request = Request(scope, receive)
        handler: Handler | None = route.direct_handler
        assert handler is not None  # only such routes are in the lane
        try:
            response = await handler(request)
        except Exception as error:
            response = await self._answer(request, error)
        await response(scope, receive, send)

    async def _answer(self, request: Request, error: Exception) -> Response:
        """The app's exception handler's answer to ``error``, looked up as Starlette does.

        Errors without a handler propagate: the request log answers them with
        a 500, as on FastAPI's way.
        """
        # A handler for Exception itself belongs to Starlette's outermost error
        # middleware, outside the request log, which answers such errors first.
        handlers = self.exception_handlers
        kinds = (k for k in type(error).__mro__ if k is not Exception)
        handler = next((handlers[k] for k in kinds if k in handlers), None)
        if handler is None:
            raise error
        if inspect.iscoroutinefunction(handler):
            return cast(Response, await handler(request, error))
        # A plain function runs in the thread pool, as Starlette runs it.
        return cast(Response, await run_in_threadpool(functools.partial(handler, request, error)))
