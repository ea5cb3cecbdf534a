"""Bearer API keys and who may do what.

* user: acts only on its own user id, whatever the path or body says;
* operator: may do everything;
* auditor: may read audit exports, certificates and keys only.

Missing or bad credentials answer 401; a principal without the right, 403.
A user naming another user id gets 404, the same as for an id that does not
exist.

Every key belongs to a namespace, and its requests are served in that tenant
(``tenant_context``); a cluster-wide operator key is served in the namespace
its ``Oblivio-Namespace`` header names (the server's ``OBLIVIO_NAMESPACE``
without one) and its listings span every namespace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request
from fastapi.openapi.models import HTTPBearer as HTTPBearerModel
from fastapi.security import HTTPAuthorizationCredentials
from fastapi.security.base import SecurityBase
from fastapi.security.utils import get_authorization_scheme_param
from starlette.concurrency import run_in_threadpool

from appdata import apikeys
from appdata.apikeys import Principal
from oblivio.http.errors import checks_query, refuse_unknown_query
from oblivio.http.throttle import FailedAuthThrottle
from oblivio.memory.context import MemoryContext

#: How the published OpenAPI document names and describes the API keys' scheme.
BEARER_SCHEME = "HTTPBearer"
BEARER_DESCRIPTION = "An oblivio API key: obl_<id>_<secret>"


def context(request: Request) -> MemoryContext:
    ctx: MemoryContext = request.app.state.context
    return ctx


async def current_context(request: Request) -> MemoryContext:
    """``context`` as a dependency: async, so FastAPI runs it on the event loop
    instead of handing it to the thread pool (it never blocks)."""
    return context(request)


def authenticated(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """The principal of the request's API key; 401 without a valid one (blocks on a
    key not in the cache: for callers off the event loop, such as the console's
    sign-in)."""
    token = presented_token(request, None if credentials is None else credentials.credentials)
    return admitted(request, known_principal(request, token) or stored_principal(request, token))


def bearer_token(request: Request) -> str | None:
    """The token of the request's ``Authorization: Bearer`` header, if it has one
    (parsed as FastAPI's ``HTTPBearer`` parses it)."""
    authorization = request.headers.get("Authorization")
    scheme, token = get_authorization_scheme_param(authorization)
    if not token or scheme.lower() != "bearer":
        return None
    return token


def presented_token(request: Request, token: str | None) -> str:
    """``token``; 401 without one, 429 while the client's address is throttled."""
    if token is None:
        raise HTTPException(401, "missing bearer API key", {"WWW-Authenticate": "Bearer"})
    throttle: FailedAuthThrottle = request.app.state.auth_throttle
    wait = throttle.retry_after(_address(request))
    if wait:
        raise HTTPException(429, "too many failed authentications", {"Retry-After": str(wait)})
    return token


def known_principal(request: Request, token: str) -> Principal | None:
    """The principal the in-memory key cache holds for ``token`` (never blocks)."""
    return context(request).api_keys.lookup(token)


def stored_principal(request: Request, token: str) -> Principal | None:
    """The principal of ``token`` read from the store (blocks), then cached."""
    memory = context(request)
    found = apikeys.authenticate_token(memory.store, token, memory.clock())
    if found is not None:
        memory.api_keys.remember(token, found)
    return found


def admitted(request: Request, found: Principal | None) -> Principal:
    """``found`` if it is a live key; else the failure is counted and answered 401."""
    if found is None or found.expired(context(request).clock()):
        throttle: FailedAuthThrottle = request.app.state.auth_throttle
        throttle.failed(_address(request))
        raise HTTPException(
            401, "invalid, revoked or expired API key", {"WWW-Authenticate": "Bearer"}
        )
    return found


def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


NAMESPACE_HEADER = "Oblivio-Namespace"

#: The ``Oblivio-Namespace`` request header, as every keyed route declares it.
NamespaceHeader = Annotated[
    str | None,
    Header(
        alias=NAMESPACE_HEADER,
        description="The namespace a cluster-wide operator key acts in (default: the "
        "server's). A namespaced key is always served in its own namespace; naming "
        "another answers 403.",
    ),
]


def served_context(root: MemoryContext, who: Principal, named: str | None = None) -> MemoryContext:
    """The tenant ``who``'s request is served in.

    A namespaced key is served in its namespace, whatever the request says (a
    different ``named`` one is refused: 403); a cluster-wide key in ``named``,
    else the server's namespace, with listings over every namespace.
    """
    if who.namespace is None and named is not None:
        return root.tenant(named, cluster_wide=True)
    if named is not None and named != who.namespace:
        raise HTTPException(403, "this key belongs to another namespace")
    return root.for_key(who.namespace)


@dataclass(frozen=True, slots=True)
class Caller:
    """An admitted request: the principal of its key, and the tenant it is served in."""

    who: Principal
    ctx: MemoryContext


#: A rule of a route kind: raises 403 for a principal it does not admit.
Rule = Callable[[Principal], None]


class KeyedRoute(SecurityBase):
    """The one dependency of a route that takes an API key: authenticates the key,
    picks the tenant, admits the principal by the route kind's ``rule``, then
    refuses query parameters the route does not declare.

    One dependency rather than a chain (bearer, principal, tenant, admission):
    FastAPI solves each dependency of each request on the event loop, and on
    ``POST /v1/events`` the chain cost a sixth of the loop's time (py-spy,
    benchmarks/http_server_ab.py).  Async, so a key in the cache (nearly every
    request) is admitted on the event loop; only a key not in it is read from
    the store, in the thread pool.  A ``SecurityBase``, so the published OpenAPI
    names the bearer scheme on every route it guards, as ``HTTPBearer`` did.
    The failures come in the chain's order: 401 or 429 for the key, 403 for a
    foreign namespace, 403 for the rule, 422 for an unknown query parameter.
    """

    def __init__(self, rule: Rule) -> None:
        self.model = HTTPBearerModel(description=BEARER_DESCRIPTION)
        self.scheme_name = BEARER_SCHEME
        self.rule = rule
        checks_query(self)  # the known-query check waits for the key (errors.py)

    async def __call__(self, request: Request, namespace: NamespaceHeader = None) -> Caller:
        token = presented_token(request, bearer_token(request))
        found = known_principal(request, token)
        if found is None:
            found = await run_in_threadpool(stored_principal, request, token)
        who = admitted(request, found)
        ctx = served_context(context(request), who, namespace)
        self.rule(who)
        refuse_unknown_query(request)  # once the caller may know what the route takes
        return Caller(who, ctx)


def kinds(*admitted_kinds: str) -> Rule:
    """A rule admitting only the given principal kinds."""

    def rule(who: Principal) -> None:
        if who.kind not in admitted_kinds:
            raise HTTPException(403, f"this {who.kind} key may not do this")

    return rule


def cluster_wide_operators(who: Principal) -> None:
    """Admits cluster-wide operator keys only: for what changes every namespace."""
    if who.kind != "operator" or who.namespace is not None:
        raise HTTPException(
            403, f"only a cluster-wide operator key may do this, not this {who.kind} key"
        )


#: Route parameters: the admitted caller of each route kind, with its tenant.
Member = Annotated[Caller, Depends(KeyedRoute(kinds("user", "operator")))]
Operator = Annotated[Caller, Depends(KeyedRoute(kinds("operator")))]
ProofReader = Annotated[Caller, Depends(KeyedRoute(kinds("user", "operator", "auditor")))]
Auditor = Annotated[Caller, Depends(KeyedRoute(kinds("operator", "auditor")))]
ClusterOperator = Annotated[Caller, Depends(KeyedRoute(cluster_wide_operators))]
#: The server's own context, for routes open without a key (published keys, health).
PublicCtx = Annotated[MemoryContext, Depends(current_context)]


class ForeignUserError(HTTPException):
    def __init__(self) -> None:
        super().__init__(404, "not found")


def acting_user(who: Principal, named: str | None) -> str | None:
    """The user id an operation is bound to.

    A user key is bound to its own id; naming any other id is treated as a
    request for something that does not exist.  Operators act for the user
    they name, or as trusted operators when they name none.
    """
    if who.kind == "user":
        if named is not None and named != who.user_id:
            raise ForeignUserError()
        return who.user_id
    return named


#: The OpenAPI extension of operations that call ``required_user``: an operator
#: key must name the user (``user_id``), a user key may leave it out.  OpenAPI
#: cannot make a parameter required for one credential only, so the document
#: says it in this member and in the parameter's description.
OPERATOR_NAMES_USER = {"x-required-for-operator-keys": ["user_id"]}


def required_user(who: Principal, named: str | None) -> str:
    user = acting_user(who, named)
    if user is None:
        raise HTTPException(422, "user_id is required for this operation")
    return user


def acting_actor(who: Principal) -> str:
    """Who asked, as the audit log and certificates record it (pseudonymised
    there): the API key."""
    return f"api-key:{who.key_id}"
