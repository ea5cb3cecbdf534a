"""``RemoteClient`` (sync) and ``AsyncRemoteClient`` (async): the facade over the HTTP API.

Both offer the methods of ``MemoryClient`` that have a route, with the same
signatures, defaults, docstrings, return types and exceptions: each method is
a :class:`~oblivio.remote.calls.Call` bound to the facade operation it stands
for, listed once in :class:`_Operations`, which both clients inherit.  What a
method does with the answer is the client's own: send and wait, or send and
await.  ``verify_log`` and ``replay_comparison`` are not offered: they walk the
database and replay projections on the host (``oblivio verify-log``,
``oblivio rebuild``), and no route exposes them (docs/remote.md).
"""

from __future__ import annotations

import abc
import asyncio
import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import Any, Generic, ParamSpec, TypeVar, overload

import httpx

from certificates import verify
from oblivio import __version__
from oblivio.client import UserMemory
from oblivio.memory import compliance, inputs
from oblivio.remote import calls
from oblivio.remote.calls import Arguments, Call
from oblivio.remote.transport import PROBLEM, Request, RetryPolicy, error_of, unreachable

P = ParamSpec("P")
R = TypeVar("R")

#: Erasures may wait up to a minute on the server (``wait_seconds``); reads answer sooner.
DEFAULT_TIMEOUT = httpx.Timeout(calls.MAX_WAIT_SECONDS + 15.0, connect=5.0)
#: ``subject_ref`` answers kept per client (they never change for a user id).
CACHE_ENTRIES = 10_000


class _Remote(Generic[P, R]):
    """A facade operation as a method of a remote client: the arguments are bound to
    the operation's own signature, then sent as the call's request."""

    def __init__(self, call: Call[P, R]) -> None:
        self.call = call
        self.__doc__ = call.operation.__doc__
        parameters = list(inspect.signature(call.operation).parameters.values())
        self.signature = inspect.Signature(parameters[1:])  # without the memory context

    def arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Arguments:
        bound = self.signature.bind(*args, **kwargs)  # a TypeError, as the facade's
        bound.apply_defaults()
        return dict(bound.arguments)

    @overload
    def __get__(self, client: None, owner: type) -> _Remote[P, R]: ...
    @overload
    def __get__(self, client: RemoteClient, owner: type | None = None) -> Callable[P, R]: ...
    @overload
    def __get__(
        self, client: AsyncRemoteClient, owner: type | None = None
    ) -> Callable[P, Awaitable[R]]: ...
    def __get__(self, client: _Client | None, owner: type | None = None) -> Any:
        if client is None:
            return self
        call, arguments = self.call, self.arguments

        def method(*args: Any, **kwargs: Any) -> Any:
            return client.perform(call, arguments(args, kwargs))

        method.__doc__ = self.__doc__
        method.__signature__ = self.signature  # type: ignore[attr-defined]
        return method


class _Operations:
    """The facade's operations that the HTTP API serves: the one list both clients share."""

    store = _Remote(calls.store)
    store_many = _Remote(calls.store_many)
    ingest = _Remote(calls.ingest)
    ingest_batch = _Remote(calls.ingest_batch)
    supersede = _Remote(calls.supersede)
    supersede_many = _Remote(calls.supersede_many)
    contradict = _Remote(calls.contradict)
    resolve_contradiction = _Remote(calls.resolve_contradiction)
    confirm_likely_update = _Remote(calls.confirm_likely_update)
    reject_likely_update = _Remote(calls.reject_likely_update)
    reinforce = _Remote(calls.reinforce)
    add_resonance_trigger = _Remote(calls.add_resonance_trigger)
    remove_resonance_trigger = _Remote(calls.remove_resonance_trigger)
    add_negative_attractor = _Remote(calls.add_negative_attractor)
    clear_negative_attractors = _Remote(calls.clear_negative_attractors)
    put_item = _Remote(calls.put_item)
    set_item_expiry = _Remote(calls.set_item_expiry)
    set_item_expiries = _Remote(calls.set_item_expiries)
    get_item = _Remote(calls.get_item)
    list_items = _Remote(calls.list_items)
    get_event = _Remote(calls.get_event)
    get_events = _Remote(calls.get_events)
    list_nodes = _Remote(calls.list_nodes)
    get_event_nodes = _Remote(calls.get_event_nodes)
    get_node = _Remote(calls.get_node)
    get_assertion_state = _Remote(calls.get_assertion_state)
    retrieve = _Remote(calls.retrieve)
    negative_attractor_count = _Remote(calls.negative_attractor_count)
    subjects = _Remote(calls.subjects)
    subject_ref = _Remote(calls.subject_ref)
    embedder_info = _Remote(calls.embedder_info)
    delete_event = _Remote(calls.delete_event)
    forget = _Remote(calls.forget)
    erasure_status = _Remote(calls.erasure_status)
    get_certificate = _Remote(calls.get_certificate)
    jwks = _Remote(calls.jwks)
    export_subject = _Remote(calls.export_subject)
    export_audit = _Remote(calls.export_audit)


#: What a handle for one user offers: the operations of the facade's ``UserMemory``
#: that the HTTP API serves (not ``verify_log``).
USER_OPERATIONS = frozenset(
    name for name in dir(UserMemory) if isinstance(getattr(_Operations, name, None), _Remote)
)


class RemoteUserMemory:
    """The operations of one user (``for_user``), ``user_id`` bound, as ``UserMemory`` offers
    them; on an ``AsyncRemoteClient`` they are awaited.  It shares the client's connections:
    close the client, not the handle."""

    def __init__(self, client: _Client, user_id: str) -> None:
        self._client = client
        self.user_id = inputs.user(user_id)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in USER_OPERATIONS:
            raise AttributeError(f"a handle for one user has no operation {name!r}")
        method: Callable[..., Any] = getattr(self._client, name)
        return functools.partial(method, user_id=self.user_id)


class _Client(_Operations, abc.ABC):
    """What both clients share: where the server is, the key, the retry policy, and
    turning an answer into the facade's result or error."""

    def __init__(
        self,
        url: str,
        api_key: str,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "User-Agent": f"oblivio-remote/{__version__}",
        }
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._http = self._connect(timeout)

    @abc.abstractmethod
    def _connect(self, timeout: float | httpx.Timeout) -> Any:
        """The client's HTTP connection pool (httpx's sync or async client)."""

    def for_user(self, user_id: str) -> RemoteUserMemory:
        """A handle whose methods act for ``user_id`` (see ``MemoryClient.for_user``)."""
        return RemoteUserMemory(self, user_id)

    @abc.abstractmethod
    def perform(self, call: Call[Any, R], arguments: Arguments) -> Any:
        """Send ``call`` with ``arguments``; its result (awaitable on the async client)."""

    def _cached(
        self, call: Call[Any, Any], arguments: Arguments
    ) -> tuple[tuple[Any, ...] | None, Any]:
        """The cache key of a cacheable call, and its answer if known (else ``None``)."""
        if not call.cached:
            return None, None
        key = (id(call), *sorted(arguments.items()))
        return key, self._cache.get(key)

    def _keep(self, key: tuple[Any, ...] | None, result: Any) -> None:
        if key is not None:
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.clear()
            self._cache[key] = result

    def _answer(
        self, request: Request, attempt: int, outcome: httpx.Response | httpx.TransportError
    ) -> httpx.Response | float:
        """What attempt ``attempt`` at ``request`` came to: the answer, or how long to
        wait before the next attempt; a connection failure not to retry raises."""
        pause = self.retry.pause(request, attempt, outcome)
        if pause is not None:
            return pause
        if isinstance(outcome, httpx.TransportError):
            raise unreachable(outcome) from outcome
        return outcome

    @staticmethod
    def _result(call: Call[Any, R], response: httpx.Response) -> R:
        if response.is_success:
            return call.decode(response)
        problem = response.headers.get("content-type", "").startswith(PROBLEM)
        if response.status_code == 404 and problem and call.missing is not None:
            return call.missing()
        raise error_of(response)


class RemoteClient(_Client):
    """Synchronous access to an oblivio server: the methods of ``MemoryClient`` over HTTP.

    ``RemoteClient("http://127.0.0.1:8000", "obl_…")`` talks to ``oblivio serve``
    with that API key; results and errors are the facade's.  A user key acts
    for its own user only; operator keys may name any ``user_id``.  Calls that
    are safe to repeat are retried on connection failures and 502/503/504
    (``retry``; see :mod:`oblivio.remote.transport`).  Use it as a context
    manager, or call :meth:`close`.
    """

    _http: httpx.Client

    def _connect(self, timeout: float | httpx.Timeout) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self._headers, timeout=timeout)

    def perform(self, call: Call[Any, R], arguments: Arguments) -> R:
        key, known = self._cached(call, arguments)
        if known is not None:
            return known  # type: ignore[no-any-return]
        result = self._result(call, self._send(call.request(arguments)))
        self._keep(key, result)
        return result

    def _send(self, request: Request) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = self._http.send(request.build(self._http))
            except httpx.TransportError as e:
                outcome = e
            answer = self._answer(request, attempt, outcome)
            if isinstance(answer, httpx.Response):
                return answer
            time.sleep(answer)

    def verify_certificate(
        self, certificate: Mapping[str, Any] | str, keys: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return dict(verify(certificate, keys if keys is not None else self.jwks()).payload)

    verify_certificate.__doc__ = compliance.verify_certificate.__doc__

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RemoteClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncRemoteClient(_Client):
    """Asynchronous access to an oblivio server: the methods of ``RemoteClient``, awaited."""

    _http: httpx.AsyncClient

    def _connect(self, timeout: float | httpx.Timeout) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, headers=self._headers, timeout=timeout)

    async def perform(self, call: Call[Any, R], arguments: Arguments) -> R:
        key, known = self._cached(call, arguments)
        if known is not None:
            return known  # type: ignore[no-any-return]
        result = self._result(call, await self._send(call.request(arguments)))
        self._keep(key, result)
        return result

    async def _send(self, request: Request) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            outcome: httpx.Response | httpx.TransportError
            try:
                outcome = await self._http.send(request.build(self._http))
            except httpx.TransportError as e:
                outcome = e
            answer = self._answer(request, attempt, outcome)
            if isinstance(answer, httpx.Response):
                return answer
            await asyncio.sleep(answer)

    async def verify_certificate(
        self, certificate: Mapping[str, Any] | str, keys: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        return dict(verify(certificate, keys if keys is not None else await self.jwks()).payload)

    verify_certificate.__doc__ = compliance.verify_certificate.__doc__

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncRemoteClient:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.close()
