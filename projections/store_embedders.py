"""The embedder as a property of the store.

A new store records the embedder its first process is configured with; every
later process inherits it, or fails at start if it is configured with another
one (API and worker processes on one database therefore always agree).  An
operator changes it with a re-embedding job (``oblivio rebuild vectors``),
during which the job's target embedder writes vectors beside the current one
and each subject switches once its new vectors are complete.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import EventStore
from projections.embedders import (
    DEFAULT_EMBEDDER,
    Embedder,
    EmbedderError,
    EmbedderOptions,
    EmbedderUnavailableError,
    resolve_embedder,
)
from projections.storage import Fetch, embedder_store, execute
from projections.storage.embedder_store import CURRENT, TARGET, RecordedEmbedder

REEMBED_COMMAND = "oblivio rebuild vectors --all --embedder"


class EmbedderMismatchError(EmbedderError):
    """This process is configured with another embedder than its store's."""


def describe(embedder: Embedder, spec: str | None) -> RecordedEmbedder:
    return RecordedEmbedder(embedder.name, spec, embedder.dimension)


class StoreEmbedders:
    """The embedders one process uses on one store, each built once, by name, when needed.

    Which embedder serves a subject is read from the store, not decided by the
    process, so a re-embedding job another process started (or finished) is
    followed without a restart.
    """

    def __init__(
        self,
        first: Embedder,
        spec: str | None,
        options: EmbedderOptions | None = None,
        fetch: Fetch = execute,
    ) -> None:
        self.first = first
        self.options = options or EmbedderOptions()
        #: How the store's embedders are read on every page (``eventstore.Backend.fetch``).
        self.fetch = fetch
        self._specs: dict[str, str | None] = {first.name: spec}
        self._built: dict[str, Embedder] = {first.name: first}
        self._lock = threading.Lock()

    def named(self, name: str, spec: str | None) -> Embedder:
        """The embedder whose vectors are called ``name``, built from ``spec`` on first use."""
        with self._lock:
            built = self._built.get(name)
            if built is not None:
                return built
            if spec is None:
                raise EmbedderUnavailableError(
                    f"the store uses embedder {name!r}, which was supplied in code; "
                    "this process must be given the same embedder object"
                )
            embedder = self.build(spec)
            if embedder.name != name:
                raise EmbedderMismatchError(
                    f"{spec!r} now builds {embedder.name!r}, but the store's vectors are {name!r}"
                )
            self._built[name], self._specs[name] = embedder, spec
            return embedder

    def build(self, spec: str) -> Embedder:
        """A new embedder from its name, with this process's options (endpoint, …)."""
        return resolve_embedder(spec, self.options)

    def built(self, name: str | None) -> Embedder | None:
        """The embedder named ``name`` if this process has built it (``None``: its own)."""
        if name is None:
            return self.first
        with self._lock:
            return self._built.get(name)

    def serving(self, conn: Connection, name: str | None) -> Embedder:
        """The embedder named ``name`` (a state token's), or the process's own for ``None``."""
        if name is None:
            return self.first
        return self.named(name, self._spec_of(conn, name))

    def writers(self, conn: Connection, stream_ids: Collection[int]) -> dict[int, list[Embedder]]:
        """Which embedders write new vectors of each stream: its serving one, and the
        target of a running re-embedding job (so a switched subject is complete)."""
        roles = embedder_store.recorded(conn, self.fetch)
        current, target = roles.get(CURRENT), roles.get(TARGET)
        if current is None:
            return {stream_id: [self.first] for stream_id in stream_ids}
        base = self.named(current.name, current.spec)
        if target is None:
            return {stream_id: [base] for stream_id in stream_ids}
        extra = self.named(target.name, target.spec)
        switched = embedder_store.switched(conn, stream_ids)
        writers: dict[int, list[Embedder]] = {}
        for stream_id in stream_ids:
            serving = extra if switched.get(stream_id) == extra.name else base
            writers[stream_id] = [serving] if serving is extra else [serving, extra]
        return writers

    def _spec_of(self, conn: Connection, name: str) -> str | None:
        with self._lock:
            if name in self._specs:
                return self._specs[name]
        for embedder in embedder_store.recorded(conn).values():
            if embedder.name == name:
                return embedder.spec
        return None


def open_store_embedders(
    store: EventStore,
    *,
    spec: str | None,
    embedder: Embedder | None,
    now: datetime,
    options: EmbedderOptions | None = None,
) -> StoreEmbedders:
    """Check the configured embedder against the store's and build what the process uses.

    ``embedder`` (an object from code) wins over ``spec`` (a name from
    settings).  With neither, an existing store's own embedder is used and a
    new store records the default.  Everything is built here, so a bad name, a
    model that cannot load or a mismatch fails at start, not at a first query.
    """
    options = options or EmbedderOptions()
    configured = embedder or (resolve_embedder(spec, options) if spec else None)
    with store.reading() as view:
        stored = embedder_store.recorded(view.connection).get(CURRENT)
    if stored is None:
        chosen = configured or resolve_embedder(DEFAULT_EMBEDDER, options)
        chosen_spec = None if embedder is not None else (spec or DEFAULT_EMBEDDER)
        stored = _record_first(store, describe(chosen, chosen_spec), now)
        if stored.name == chosen.name:
            return StoreEmbedders(chosen, stored.spec, options, store.backend.fetch)
    if configured is None:
        return _inherit(stored, options, store.backend.fetch)
    if configured.name != stored.name:
        raise EmbedderMismatchError(
            f"this store embeds with {stored.name!r} but this process is configured with "
            f"{configured.name!r}; run without OBLIVIO_EMBEDDER/--embedder to use the "
            f"store's embedder, or move the store with `{REEMBED_COMMAND} "
            f"{spec or 'NAME'}`"
        )
    return StoreEmbedders(configured, stored.spec, options, store.backend.fetch)


def current_embedder(store: EventStore) -> RecordedEmbedder:
    """The embedder the store records as its own (every process embeds with it)."""
    with store.reading() as view:
        return embedder_store.recorded(view.connection)[CURRENT]


def _inherit(stored: RecordedEmbedder, options: EmbedderOptions, fetch: Fetch) -> StoreEmbedders:
    """The store's own embedder, for a process configured with none."""
    if stored.spec is None:
        raise EmbedderUnavailableError(
            f"this store embeds with {stored.name!r}, which was supplied in code; "
            "pass the same embedder to this process"
        )
    embedder = resolve_embedder(stored.spec, options)
    if embedder.name != stored.name:
        raise EmbedderMismatchError(
            f"{stored.spec!r} now builds {embedder.name!r}, but the store's vectors are "
            f"{stored.name!r}; re-embed with `{REEMBED_COMMAND} {stored.spec}`"
        )
    return StoreEmbedders(embedder, stored.spec, options, fetch)


def _record_first(store: EventStore, first: RecordedEmbedder, now: datetime) -> RecordedEmbedder:
    """Record a new store's embedder; if another process was first, theirs stands."""
    try:
        with store.transaction() as tx:
            stored = embedder_store.recorded(tx.connection).get(CURRENT)
            if stored is not None:
                return stored
            embedder_store.record(tx.connection, CURRENT, first, now)
            return first
    except sa.exc.IntegrityError:
        with store.reading() as view:
            return embedder_store.recorded(view.connection)[CURRENT]
