"""Hot routes served with one hand-off to the thread pool.

FastAPI's own handler for a route like ``POST /v1/events`` solves the
dependency tree, runs the blocking authentication dependency in the thread
pool, validates the parsed JSON body, runs the ``def`` endpoint in the thread
pool again, then validates the returned model against the response model and
encodes it.  For an operation that itself takes well under a millisecond,
that machinery costs more than the operation.

``DirectRoute`` keeps every declaration of the route (body model, response
model, problem responses, bearer security), so the published OpenAPI is
unchanged, but serves a request itself: the bearer header and the body bytes
are read on the event loop, then one thread-pool call authenticates the key
and checks the principal kind (401, 403), validates the body with pydantic's
JSON parser (422), runs the endpoint and serialises its model with pydantic's
serialiser.  The order of the refusals is FastAPI's: a request without a
valid key answers 401 whatever its body holds.  Errors are raised, not
answered, so the app's handlers turn them into problem responses as before.

It serves only endpoints of one shape: a JSON body model, the memory context
and an admission from ``oblivio.http.auth.allow``, returning the route's
response model, or a ``Response`` it encoded itself (passed on as FastAPI
passes it on).  Requests run on a bounded pool of the route's own.  Any
other route of a router using this class gets FastAPI's handler.
Dependencies added where the router is included are not run by the direct
handler; the routers here are included without any.
"""

from __future__ import annotations

import asyncio
import contextvars
import email.message
import functools
import os
from collections.abc import Callable, Coroutine
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeGuard

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import BaseModel, ValidationError

from eventstore.apikeys import Principal
from oblivio.http.auth import Admission, admission_of, bearer, context, current_context

Handler = Callable[[Request], Coroutine[Any, Any, Response]]
JSON = "application/json"
#: Threads per hot route: twice the cores, so threads waiting on a database
#: round trip leave others to run.  More only contend for the one GIL: with
#: 8 busy clients, a pool of 40 threads cost a retrieve about 0.3 ms more
#: server CPU than one of 2 (docs/benchmarks.md, "A pool per hot route, ...").
#: Requests beyond it queue on the route's pool, not on the other routes'.
DIRECT_THREADS = 2 * (os.cpu_count() or 1)


@functools.cache
def route_pool(name: str) -> ThreadPoolExecutor:
    """A route's own bounded pool: a slow store never holds up a retrieve.

    One per route name and process, shared by every app built in it (tests
    build many), so idle threads never pile up.
    """
    return ThreadPoolExecutor(DIRECT_THREADS, thread_name_prefix=f"oblivio-http-{name}")


async def in_thread(pool: Executor, call: Callable[..., Response], *args: Any) -> Response:
    """``call(*args)`` in ``pool``, with the caller's context variables.

    ``loop.run_in_executor`` rather than ``run_in_threadpool``: anyio's
    capacity limiter and cancel scope cost about 35 µs of CPU per call more,
    a tenth of what the server spends on a request besides the operation.
    A call that has started runs to its end even if the request is cancelled,
    as with anyio; one still queued is dropped with it.
    """
    bound = functools.partial(contextvars.copy_context().run, call, *args)
    return await asyncio.get_running_loop().run_in_executor(pool, bound)


@dataclass(frozen=True)
class DirectEndpoint:
    """What the direct handler needs of an endpoint: its call and parameter names."""

    call: Callable[..., Any]
    body_name: str
    body_model: type[BaseModel]
    context_name: str
    principal_name: str
    admit: Admission
    response_model: type[BaseModel]
    status_code: int

    def serve(
        self, request: Request, credentials: HTTPAuthorizationCredentials | None, raw: bytes
    ) -> Response:
        """Authenticate, validate, run and serialise: the part that runs in the thread pool."""
        who: Principal = self.admit(request, credentials)
        body = parse_json_body(self.body_model, request.headers.get("content-type"), raw)
        arguments = {
            self.body_name: body,
            self.context_name: context(request),
            self.principal_name: who,
        }
        result = self.call(**arguments)
        if isinstance(result, Response):
            return result  # encoded by the endpoint, as FastAPI's handler would pass it on
        if not isinstance(result, self.response_model):
            raise TypeError(f"{self.call.__name__} returned {type(result).__name__}")
        return Response(result.model_dump_json(), self.status_code, media_type=JSON)


def parse_json_body(model: type[BaseModel], content_type: str | None, raw: bytes) -> BaseModel:
    """The body as ``model``; errors located under ``body`` as FastAPI locates them.

    Like FastAPI with its strict content type, a body is only read as JSON
    when the request says it is JSON.
    """
    if not raw:
        raise _invalid("missing", "Field required")
    if not _is_json(content_type):
        raise _invalid("model_attributes_type", "a JSON body (Content-Type: application/json)")
    try:
        return model.model_validate_json(raw)
    except ValidationError as e:
        # Without the input: it may be personal, and no answer or log shows it.
        errors = e.errors(include_input=False, include_url=False)
        located = [{**error, "loc": ("body", *error["loc"])} for error in errors]
        raise RequestValidationError(located) from None


def _invalid(kind: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"type": kind, "loc": ("body",), "msg": message}])


def _is_json(content_type: str | None) -> bool:
    if content_type == JSON:
        return True  # what nearly every client sends: no need to parse it
    if not content_type:
        return False
    parsed = email.message.Message()
    parsed["content-type"] = content_type
    subtype = parsed.get_content_subtype()
    return parsed.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class DirectRoute(APIRoute):
    """An ``APIRoute`` that serves endpoints of the direct shape in one hand-off."""

    #: The handler of a direct endpoint, which the express lane
    #: (``oblivio.http.express``) also serves; None for other shapes.
    direct_handler: Handler | None = None

    def get_route_handler(self) -> Handler:
        endpoint = direct_endpoint(self)
        if endpoint is None:
            return super().get_route_handler()
        pool = route_pool(self.name)

        async def handle(request: Request) -> Response:
            credentials = await bearer(request)
            raw = await request.body()
            return await in_thread(pool, endpoint.serve, request, credentials, raw)

        self.direct_handler = handle
        return handle


def direct_endpoint(route: APIRoute) -> DirectEndpoint | None:
    """The route's endpoint as a ``DirectEndpoint``, or None if it has another shape."""
    d = route.dependant
    if d.path_params or d.query_params or d.header_params or d.cookie_params:
        return None
    if len(d.body_params) != 1 or len(d.dependencies) != 2 or d.call is None:
        return None
    if d.request_param_name or d.response_param_name or d.background_tasks_param_name:
        return None
    body, response_model = d.body_params[0], route.response_model
    body_model = body.field_info.annotation
    if not (_is_model(body_model) and _is_model(response_model)):
        return None
    names = {sub.call: sub.name for sub in d.dependencies}
    context_name = names.pop(current_context, None)
    admissions = [(admission_of(call), name) for call, name in names.items()]
    if context_name is None or len(admissions) != 1:
        return None
    admit, principal_name = admissions[0]
    if admit is None or principal_name is None:
        return None
    return DirectEndpoint(
        call=d.call,
        body_name=body.name,
        body_model=body_model,
        context_name=context_name,
        principal_name=principal_name,
        admit=admit,
        response_model=response_model,
        status_code=route.status_code or 200,
    )


def _is_model(value: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(value, type) and issubclass(value, BaseModel)
