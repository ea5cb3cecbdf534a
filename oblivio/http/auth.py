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

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from appdata import apikeys
from appdata.apikeys import Principal
from oblivio.http.errors import checks_query, refuse_unknown_query
from oblivio.http.throttle import FailedAuthThrottle
from oblivio.memory.context import MemoryContext

bearer = HTTPBearer(auto_error=False, description="An oblivio API key: obl_<id>_<secret>")


def context(request: Request) -> MemoryContext:
    ctx: MemoryContext = request.app.state.context
    return ctx


async def current_context(request: Request) -> MemoryContext:
    """``context`` as a dependency: async, so FastAPI runs it on the event loop
    instead of handing it to the thread pool (it never blocks)."""
    return context(request)


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def authenticated(request: Request, credentials: HTTPAuthorizationCredentials | None) -> Principal:
    """The principal of the request's API key; 401 without a valid one (blocks on a
    key not in the cache: for callers off the event loop, such as the console's
    sign-in)."""
    token = presented_token(request, credentials)
    return admitted(request, known_principal(request, token) or stored_principal(request, token))


async def principal(request: Request, credentials: Credentials) -> Principal:
    """``authenticated`` as a dependency: solved once per request, then shared by the
    admission check and the tenant.

    Async, so a key in the cache (nearly every request) is admitted on the event
    loop; only a key not in it is read from the store, in the thread pool.  A sync
    dependency would cost every request a hand-off to the thread pool and back.
    """
    token = presented_token(request, credentials)
    found = known_principal(request, token)
    if found is None:
        found = await run_in_threadpool(stored_principal, request, token)
    return admitted(request, found)


def presented_token(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str:
    """The bearer token; 401 without one, 429 while the client's address is throttled."""
    if credentials is None:
        raise HTTPException(401, "missing bearer API key", {"WWW-Authenticate": "Bearer"})
    throttle: FailedAuthThrottle = request.app.state.auth_throttle
    wait = throttle.retry_after(_address(request))
    if wait:
        raise HTTPException(429, "too many failed authentications", {"Retry-After": str(wait)})
    return credentials.credentials


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


Authenticated = Annotated[Principal, Depends(principal)]

#: A dependency made by ``allow``: the principal of an authenticated request.
Admission = Callable[[Request, Principal], Coroutine[Any, Any, Principal]]


def allow(*kinds: str) -> Admission:
    """A dependency admitting only the given principal kinds (async: it never blocks)."""

    @checks_query
    async def check(request: Request, who: Authenticated) -> Principal:
        if who.kind not in kinds:
            raise HTTPException(403, f"this {who.kind} key may not do this")
        refuse_unknown_query(request)  # once the caller may know what the route takes
        return who

    return check


NAMESPACE_HEADER = "Oblivio-Namespace"


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


async def tenant_context(
    request: Request,
    who: Authenticated,
    namespace: Annotated[
        str | None,
        Header(
            alias=NAMESPACE_HEADER,
            description="The namespace a cluster-wide operator key acts in (default: the "
            "server's). A namespaced key is always served in its own namespace; naming "
            "another answers 403.",
        ),
    ] = None,
) -> MemoryContext:
    """The request's tenant: the memory context of its key's namespace."""
    return served_context(context(request), who, namespace)


@checks_query
async def cluster_operators(request: Request, who: Authenticated) -> Principal:
    """Admits cluster-wide operator keys only: for what changes every namespace."""
    if who.kind != "operator" or who.namespace is not None:
        raise HTTPException(
            403, f"only a cluster-wide operator key may do this, not this {who.kind} key"
        )
    refuse_unknown_query(request)
    return who


members = allow("user", "operator")
operators = allow("operator")
readers_of_proofs = allow("user", "operator", "auditor")
auditors = allow("operator", "auditor")

#: Route parameters: the request's tenant, and its principal as each rule admits it.
Ctx = Annotated[MemoryContext, Depends(tenant_context)]
#: The server's own context, for routes open without a key (published keys, health).
PublicCtx = Annotated[MemoryContext, Depends(current_context)]
Member = Annotated[Principal, Depends(members)]
Operator = Annotated[Principal, Depends(operators)]
ProofReader = Annotated[Principal, Depends(readers_of_proofs)]
Auditor = Annotated[Principal, Depends(auditors)]
ClusterOperator = Annotated[Principal, Depends(cluster_operators)]


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
