"""The Python facade: ``MemoryClient`` (sync) and ``MemoryEngine`` (async), same methods.

Each method is a memory command or query bound to this client's context, so
signatures and docstrings are defined once, in ``oblivio.memory``.
``client.for_user(user_id)`` gives a handle whose methods are the same
operations with ``user_id`` bound too (``UserMemory``, ``AsyncUserMemory``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

from eventstore.ids import check_namespace
from oblivio.bootstrap import open_memory
from oblivio.memory import commands, compliance, inputs, items, queries
from oblivio.memory import ingest as ingestion
from oblivio.memory.context import MemoryContext
from oblivio.memory.digests import replay_comparison
from oblivio.settings import Settings
from projections.claims.plan import ClaimExtractor
from projections.embedders import Embedder
from projections.extraction import Extractor
from projections.scoring import ScoringConfig

P = ParamSpec("P")
R = TypeVar("R")
Op = Callable[Concatenate[MemoryContext, P], R]


class _Bound(Generic[P, R]):
    """A memory operation exposed as a method: the client's context is bound first."""

    def __init__(self, operation: Op[P, R]) -> None:
        self.operation = operation
        self.__doc__ = operation.__doc__

    def __get__(self, client: _Base, owner: type | None = None) -> Callable[P, R]:
        return functools.partial(self.operation, client.context)


class _Awaited(Generic[P, R]):
    """The same, run in a worker thread and awaited (for ``MemoryEngine``)."""

    def __init__(self, operation: Op[P, R]) -> None:
        self.operation = operation
        self.__doc__ = operation.__doc__

    def __get__(self, engine: _Base, owner: type | None = None) -> Callable[P, Awaitable[R]]:
        operation, context = self.operation, engine.context

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await asyncio.to_thread(operation, context, *args, **kwargs)

        return call


class _ForUser(Generic[R]):
    """An operation of a handle bound to one user: context and ``user_id`` bound first."""

    def __init__(self, operation: Callable[..., R]) -> None:
        self.operation = operation
        self.__doc__ = operation.__doc__

    def __get__(self, handle: _UserHandle, owner: type | None = None) -> Callable[..., R]:
        return functools.partial(self.operation, handle.context, user_id=handle.user_id)


class _AwaitedForUser(Generic[R]):
    """The same, run in a worker thread and awaited (for ``AsyncUserMemory``)."""

    def __init__(self, operation: Callable[..., R]) -> None:
        self.operation = operation
        self.__doc__ = operation.__doc__

    def __get__(
        self, handle: _UserHandle, owner: type | None = None
    ) -> Callable[..., Awaitable[R]]:
        bound = functools.partial(self.operation, handle.context, user_id=handle.user_id)

        async def call(*args: Any, **kwargs: Any) -> R:
            return await asyncio.to_thread(bound, *args, **kwargs)

        return call


class _UserHandle:
    def __init__(
        self, context: MemoryContext, user_id: str, default_meta: Mapping[str, Any] | None
    ) -> None:
        self.user_id = inputs.user(user_id)
        # The client's default, then this handle's, then each call's meta.
        merged = inputs.merged_meta(context.default_meta, default_meta)
        self.context = dataclasses.replace(context, default_meta=merged)


class _Base:
    def __init__(
        self,
        path: str | Path | None = None,
        *,
        database_url: str | None = None,
        namespace: str | None = None,
        embedder: Embedder | str | None = None,
        extractor: Extractor | None = None,
        scoring: ScoringConfig | None = None,
        settings: Settings | None = None,
        default_meta: Mapping[str, Any] | None = None,
        claim_extractor: ClaimExtractor | None = None,
    ) -> None:
        if namespace is not None:
            check_namespace(namespace)  # a typed error now, not at the first write
        if settings is None:
            settings = Settings.from_env(
                data_dir=path, database_url=database_url, namespace=namespace
            )
        if isinstance(embedder, str):  # a name, as OBLIVIO_EMBEDDER would give it
            settings, embedder = settings.model_copy(update={"embedder": embedder}), None
        self.settings = settings
        self.context = open_memory(
            settings,
            embedder=embedder,
            extractor=extractor,
            scoring=scoring,
            default_meta=default_meta,
            claim_extractor=claim_extractor,
        )

    def close(self) -> None:
        self.context.access.close()  # writes this process's last access counts
        self.context.store.close()


class MemoryClient(_Base):
    """Synchronous access to an oblivio store.

    ``MemoryClient("./memory")`` opens (or creates) an embedded store in that
    directory; ``MemoryClient(database_url="postgresql+psycopg://…")`` opens
    PostgreSQL.  Use it as a context manager, or call :meth:`close`.
    ``default_meta`` is merged under every ``store``'s own ``meta``
    (``{**default_meta, **meta}``: the call wins).
    """

    def for_user(
        self, user_id: str, *, default_meta: Mapping[str, Any] | None = None
    ) -> UserMemory:
        """A handle whose methods act for ``user_id``, with ``default_meta`` over the client's."""
        return UserMemory(self.context, user_id, default_meta)

    store = _Bound(commands.store)
    ingest = _Bound(ingestion.ingest)
    ingest_batch = _Bound(ingestion.ingest_batch)
    supersede = _Bound(commands.supersede)
    supersede_many = _Bound(commands.supersede_many)
    contradict = _Bound(commands.contradict)
    resolve_contradiction = _Bound(commands.resolve_contradiction)
    reinforce = _Bound(commands.reinforce)
    add_resonance_trigger = _Bound(commands.add_resonance_trigger)
    remove_resonance_trigger = _Bound(commands.remove_resonance_trigger)
    add_negative_attractor = _Bound(commands.add_negative_attractor)
    clear_negative_attractors = _Bound(commands.clear_negative_attractors)
    put_item = _Bound(items.put_item)
    set_item_expiry = _Bound(items.set_item_expiry)
    set_item_expiries = _Bound(items.set_item_expiries)
    get_item = _Bound(items.get_item)
    list_items = _Bound(items.list_items)
    get_event = _Bound(queries.get_event)
    get_events = _Bound(queries.get_events)
    list_nodes = _Bound(queries.list_nodes)
    get_event_nodes = _Bound(queries.get_event_nodes)
    get_node = _Bound(queries.get_node)
    get_assertion_state = _Bound(queries.get_assertion_state)
    retrieve = _Bound(queries.retrieve)
    negative_attractor_count = _Bound(queries.negative_attractor_count)
    subjects = _Bound(queries.subjects)
    subject_ref = _Bound(queries.subject_ref)
    embedder_info = _Bound(queries.embedder_info)
    replay_comparison = _Bound(replay_comparison)
    delete_event = _Bound(compliance.delete_event)
    forget = _Bound(compliance.forget)
    erasure_status = _Bound(compliance.erasure_status)
    get_certificate = _Bound(compliance.get_certificate)
    jwks = _Bound(compliance.jwks)
    verify_certificate = _Bound(compliance.verify_certificate)
    verify_log = _Bound(compliance.verify_log)
    export_subject = _Bound(compliance.export_subject)
    export_audit = _Bound(compliance.export_audit)

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class MemoryEngine(_Base):
    """Asynchronous access to an oblivio store: the methods of ``MemoryClient``, awaited."""

    def for_user(
        self, user_id: str, *, default_meta: Mapping[str, Any] | None = None
    ) -> AsyncUserMemory:
        """A handle whose methods act for ``user_id``, awaited; see ``MemoryClient.for_user``."""
        return AsyncUserMemory(self.context, user_id, default_meta)

    store = _Awaited(commands.store)
    ingest = _Awaited(ingestion.ingest)
    ingest_batch = _Awaited(ingestion.ingest_batch)
    supersede = _Awaited(commands.supersede)
    supersede_many = _Awaited(commands.supersede_many)
    contradict = _Awaited(commands.contradict)
    resolve_contradiction = _Awaited(commands.resolve_contradiction)
    reinforce = _Awaited(commands.reinforce)
    add_resonance_trigger = _Awaited(commands.add_resonance_trigger)
    remove_resonance_trigger = _Awaited(commands.remove_resonance_trigger)
    add_negative_attractor = _Awaited(commands.add_negative_attractor)
    clear_negative_attractors = _Awaited(commands.clear_negative_attractors)
    put_item = _Awaited(items.put_item)
    set_item_expiry = _Awaited(items.set_item_expiry)
    set_item_expiries = _Awaited(items.set_item_expiries)
    get_item = _Awaited(items.get_item)
    list_items = _Awaited(items.list_items)
    get_event = _Awaited(queries.get_event)
    get_events = _Awaited(queries.get_events)
    list_nodes = _Awaited(queries.list_nodes)
    get_event_nodes = _Awaited(queries.get_event_nodes)
    get_node = _Awaited(queries.get_node)
    get_assertion_state = _Awaited(queries.get_assertion_state)
    retrieve = _Awaited(queries.retrieve)
    negative_attractor_count = _Awaited(queries.negative_attractor_count)
    subjects = _Awaited(queries.subjects)
    subject_ref = _Awaited(queries.subject_ref)
    embedder_info = _Awaited(queries.embedder_info)
    replay_comparison = _Awaited(replay_comparison)
    delete_event = _Awaited(compliance.delete_event)
    forget = _Awaited(compliance.forget)
    erasure_status = _Awaited(compliance.erasure_status)
    get_certificate = _Awaited(compliance.get_certificate)
    jwks = _Awaited(compliance.jwks)
    verify_certificate = _Awaited(compliance.verify_certificate)
    verify_log = _Awaited(compliance.verify_log)
    export_subject = _Awaited(compliance.export_subject)
    export_audit = _Awaited(compliance.export_audit)

    async def __aenter__(self) -> MemoryEngine:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await asyncio.to_thread(self.close)


class UserMemory(_UserHandle):
    """The operations of one user (``MemoryClient.for_user``): ``user_id`` is bound.

    It shares the client's connections: close the client, not the handle.
    """

    store = _ForUser(commands.store)
    ingest = _ForUser(ingestion.ingest)
    ingest_batch = _ForUser(ingestion.ingest_batch)
    supersede = _ForUser(commands.supersede)
    supersede_many = _ForUser(commands.supersede_many)
    contradict = _ForUser(commands.contradict)
    resolve_contradiction = _ForUser(commands.resolve_contradiction)
    reinforce = _ForUser(commands.reinforce)
    add_resonance_trigger = _ForUser(commands.add_resonance_trigger)
    remove_resonance_trigger = _ForUser(commands.remove_resonance_trigger)
    add_negative_attractor = _ForUser(commands.add_negative_attractor)
    clear_negative_attractors = _ForUser(commands.clear_negative_attractors)
    put_item = _ForUser(items.put_item)
    set_item_expiry = _ForUser(items.set_item_expiry)
    set_item_expiries = _ForUser(items.set_item_expiries)
    get_item = _ForUser(items.get_item)
    list_items = _ForUser(items.list_items)
    get_event = _ForUser(queries.get_event)
    get_events = _ForUser(queries.get_events)
    get_event_nodes = _ForUser(queries.get_event_nodes)
    get_node = _ForUser(queries.get_node)
    get_assertion_state = _ForUser(queries.get_assertion_state)
    retrieve = _ForUser(queries.retrieve)
    negative_attractor_count = _ForUser(queries.negative_attractor_count)
    delete_event = _ForUser(compliance.delete_event)
    forget = _ForUser(compliance.forget)
    export_subject = _ForUser(compliance.export_subject)
    verify_log = _ForUser(compliance.verify_log)


class AsyncUserMemory(_UserHandle):
    """The operations of one user, awaited (``MemoryEngine.for_user``)."""

    store = _AwaitedForUser(commands.store)
    ingest = _AwaitedForUser(ingestion.ingest)
    ingest_batch = _AwaitedForUser(ingestion.ingest_batch)
    supersede = _AwaitedForUser(commands.supersede)
    supersede_many = _AwaitedForUser(commands.supersede_many)
    contradict = _AwaitedForUser(commands.contradict)
    resolve_contradiction = _AwaitedForUser(commands.resolve_contradiction)
    reinforce = _AwaitedForUser(commands.reinforce)
    add_resonance_trigger = _AwaitedForUser(commands.add_resonance_trigger)
    remove_resonance_trigger = _AwaitedForUser(commands.remove_resonance_trigger)
    add_negative_attractor = _AwaitedForUser(commands.add_negative_attractor)
    clear_negative_attractors = _AwaitedForUser(commands.clear_negative_attractors)
    put_item = _AwaitedForUser(items.put_item)
    set_item_expiry = _AwaitedForUser(items.set_item_expiry)
    set_item_expiries = _AwaitedForUser(items.set_item_expiries)
    get_item = _AwaitedForUser(items.get_item)
    list_items = _AwaitedForUser(items.list_items)
    get_event = _AwaitedForUser(queries.get_event)
    get_events = _AwaitedForUser(queries.get_events)
    get_event_nodes = _AwaitedForUser(queries.get_event_nodes)
    get_node = _AwaitedForUser(queries.get_node)
    get_assertion_state = _AwaitedForUser(queries.get_assertion_state)
    retrieve = _AwaitedForUser(queries.retrieve)
    negative_attractor_count = _AwaitedForUser(queries.negative_attractor_count)
    delete_event = _AwaitedForUser(compliance.delete_event)
    forget = _AwaitedForUser(compliance.forget)
    export_subject = _AwaitedForUser(compliance.export_subject)
    verify_log = _AwaitedForUser(compliance.verify_log)
