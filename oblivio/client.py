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
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from eventstore.ids import check_namespace
from oblivio.bootstrap import open_memory
from oblivio.memory import commands, compliance, dpo, inputs, items, queries, updates
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


class _Operation(Generic[P, R]):
    """A memory operation exposed as a method of the facade classes.

    The operation is bound to the instance's context (and, on a per-user handle,
    to its ``user_id``); on ``MemoryEngine`` and ``AsyncUserMemory`` it runs in a
    worker thread and is awaited.  Each operation is listed once, in
    ``_UserOperations`` or ``_Operations``, which the four classes inherit.
    """

    def __init__(self, operation: Op[P, R]) -> None:
        self.operation = operation
        self.__doc__ = operation.__doc__

    @overload
    def __get__(self, instance: None, owner: type) -> _Operation[P, R]: ...

    @overload
    def __get__(self, instance: MemoryClient, owner: type | None = None) -> Callable[P, R]: ...

    @overload
    def __get__(
        self, instance: MemoryEngine, owner: type | None = None
    ) -> Callable[P, Awaitable[R]]: ...

    @overload
    def __get__(self, instance: UserMemory, owner: type | None = None) -> Callable[..., R]: ...

    @overload
    def __get__(
        self, instance: AsyncUserMemory, owner: type | None = None
    ) -> Callable[..., Awaitable[R]]: ...

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        operation: Callable[..., R] = self.operation
        if isinstance(instance, _UserHandle):
            bound = functools.partial(operation, instance.context, user_id=instance.user_id)
        else:
            bound = functools.partial(operation, instance.context)
        if not instance.awaited:
            return bound

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(bound, *args, **kwargs)

        return call


class _UserOperations:
    """The operations a per-user handle offers too (for its bound user)."""

    #: Whether the methods run in a worker thread and are awaited.
    awaited = False

    store = _Operation(commands.store)
    store_many = _Operation(commands.store_many)
    ingest = _Operation(ingestion.ingest)
    ingest_batch = _Operation(ingestion.ingest_batch)
    supersede = _Operation(commands.supersede)
    supersede_many = _Operation(commands.supersede_many)
    contradict = _Operation(commands.contradict)
    resolve_contradiction = _Operation(commands.resolve_contradiction)
    confirm_likely_update = _Operation(updates.confirm_likely_update)
    reject_likely_update = _Operation(updates.reject_likely_update)
    reinforce = _Operation(commands.reinforce)
    add_resonance_trigger = _Operation(commands.add_resonance_trigger)
    remove_resonance_trigger = _Operation(commands.remove_resonance_trigger)
    add_negative_attractor = _Operation(commands.add_negative_attractor)
    clear_negative_attractors = _Operation(commands.clear_negative_attractors)
    put_item = _Operation(items.put_item)
    set_item_expiry = _Operation(items.set_item_expiry)
    set_item_expiries = _Operation(items.set_item_expiries)
    get_item = _Operation(items.get_item)
    list_items = _Operation(items.list_items)
    get_event = _Operation(queries.get_event)
    get_events = _Operation(queries.get_events)
    get_event_nodes = _Operation(queries.get_event_nodes)
    get_node = _Operation(queries.get_node)
    get_assertion_state = _Operation(queries.get_assertion_state)
    retrieve = _Operation(queries.retrieve)
    negative_attractor_count = _Operation(queries.negative_attractor_count)
    delete_event = _Operation(compliance.delete_event)
    forget = _Operation(compliance.forget)
    export_subject = _Operation(compliance.export_subject)
    verify_log = _Operation(compliance.verify_log)


class _Operations(_UserOperations):
    """Every operation of ``MemoryClient`` and ``MemoryEngine``: the per-user ones and
    those that span users or the store."""

    list_nodes = _Operation(queries.list_nodes)
    subjects = _Operation(queries.subjects)
    subject_ref = _Operation(queries.subject_ref)
    embedder_info = _Operation(queries.embedder_info)
    replay_comparison = _Operation(replay_comparison)
    erasure_status = _Operation(compliance.erasure_status)
    get_certificate = _Operation(compliance.get_certificate)
    jwks = _Operation(compliance.jwks)
    verify_certificate = _Operation(compliance.verify_certificate)
    export_audit = _Operation(compliance.export_audit)
    # The data-protection officer's desk (oblivio.memory.dpo): operator operations.
    look_up_person = _Operation(dpo.look_up)
    restrict = _Operation(dpo.restrict)
    lift_restriction = _Operation(dpo.lift_restriction)
    place_legal_hold = _Operation(dpo.place_hold)
    lift_legal_hold = _Operation(dpo.lift_hold)
    request_register = _Operation(dpo.register)


class _UserHandle:
    def __init__(
        self, context: MemoryContext, user_id: str, default_meta: Mapping[str, Any] | None
    ) -> None:
        self.user_id = inputs.user(user_id)
        # The client's default, then this handle's, then each call's meta.
        merged = inputs.merged_meta(context.default_meta, default_meta)
        self.context = dataclasses.replace(context, default_meta=merged)


class _Base(_Operations):
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
        self.context.retrieval.save_images()  # the next process loads what this one built
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

    awaited = True

    def for_user(
        self, user_id: str, *, default_meta: Mapping[str, Any] | None = None
    ) -> AsyncUserMemory:
        """A handle whose methods act for ``user_id``, awaited; see ``MemoryClient.for_user``."""
        return AsyncUserMemory(self.context, user_id, default_meta)

    async def __aenter__(self) -> MemoryEngine:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await asyncio.to_thread(self.close)


class UserMemory(_UserHandle, _UserOperations):
    """The operations of one user (``MemoryClient.for_user``): ``user_id`` is bound.

    It shares the client's connections: close the client, not the handle.
    """


class AsyncUserMemory(_UserHandle, _UserOperations):
    """The operations of one user, awaited (``MemoryEngine.for_user``)."""

    awaited = True
