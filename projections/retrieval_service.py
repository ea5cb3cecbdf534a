"""The retrieval service: the projections' read facade for ranked and vector-state reads.

``oblivio.memory`` calls it once per query.  It keeps the per-subject
retrieval indexes (:class:`~projections.retrieval_index.RetrievalCache`) and
the protocol that keeps them right: read the subject's state token
(:mod:`projections.storage.vector_reads`) before the rows it guards, serve
the cached index while the token matches, apply new events to it when the
change is only later events of the same stream, reload it otherwise, and, for
a consistent read, first help the vector state (and, for a ranked read, the
follower that judges new memories) catch up with the caller's last write.
The one token read also says whether processing of the subject is restricted
(Art. 18): a ranked read then ranks nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from eventstore import EventStore, RecordedEvent
from projections.access import AccessLog
from projections.embedders import Embedder
from projections.errors import NotCaughtUpError, ProcessingRestrictedError
from projections.index_image import IndexImages
from projections.model import ScoredNode
from projections.retrieval_index import (
    NodeFilter,
    RetrievalCache,
    SubjectIndex,
    load_subject,
    rank,
    refresh,
    refreshable,
)
from projections.scoring import ScoringConfig
from projections.storage.vector_reads import StateToken, state_token
from projections.storage.vector_store import VectorStore
from projections.store_embedders import StoreEmbedders


class FollowedUp(Protocol):
    """What a follower's wait says (``workers.follower.CaughtUp``)."""

    @property
    def may_have_appended(self) -> bool: ...


class CatchesUp(Protocol):
    """The asynchronous projection's runner, as a consistent read needs it
    (``workers.projector.ProjectionRunner``): it catches up the reader's own stream."""

    def catch_up_stream(self, stream_id: int, version: int, timeout: float) -> bool: ...


class Follower(Protocol):
    """Another follower a consistent ranked read waits for, by its marks of each stream
    (``workers.updates.LikelyUpdateWorker``: what replaced what is ranked as of
    the caller's last write)."""

    @property
    def name(self) -> str: ...

    def catch_up_stream(
        self, stream_id: int, version: int, timeout: float, *, judged: int
    ) -> FollowedUp | None: ...


@dataclass
class RetrievalService:
    """Ranked retrieval and the vector state's reads, for one store and namespace's callers.

    ``projection`` is the name of the asynchronous projection whose
    checkpoints the state token reads (the vector state); ``embedders`` are
    the store's, which serve each subject's vectors.
    """

    store: EventStore
    projection: str
    embedders: StoreEmbedders
    runner: CatchesUp
    access: AccessLog
    cache: RetrievalCache
    images: IndexImages

    # -- consistency ------------------------------------------------------------------

    def wait(self, namespace: str, user: str, timeout: float) -> int | None:
        """Block until the vector state includes the caller's last write; the stream id
        (``None`` for a subject without a readable stream)."""
        head = self.store.head(namespace, user)
        if head is None or head.closed_at is not None:
            return None
        stream_id = head.stream.stream_id
        if head.version and not self.runner.catch_up_stream(stream_id, head.version, timeout):
            raise NotCaughtUpError()
        return stream_id

    # -- retrieval --------------------------------------------------------------------

    def retrieve(
        self,
        namespace: str,
        user: str,
        text: str,
        wanted: NodeFilter,
        limit: int,
        *,
        scoring: ScoringConfig,
        clock: Callable[[], datetime],
        consistent: bool,
        timeout: float,
        judged_by: Follower | None = None,
    ) -> list[ScoredNode]:
        """The caller's nodes ranked for ``text``, each counted as one access (Semvec's
        access frequency: it slows the node's fading).  A consistent read first waits
        for ``judged_by`` too to have passed the caller's last write.  Raises
        ``ProcessingRestrictedError`` while processing of the caller is restricted, before
        waiting for anything."""
        token = self._token(namespace, user, judged_by)
        if token is not None and token.restricted:
            raise ProcessingRestrictedError()
        if consistent:
            token = self._caught_up(namespace, user, token, timeout, judged_by)
        served = self._serve(namespace, user, scoring, token)
        if served is None:
            return []
        index, embedder = served
        [query_vector] = embedder.embed([text])
        now = clock()
        results = rank(index, text, query_vector, now, wanted, limit)
        self._count_accesses(index, results, now)
        return results

    def neighbours(
        self,
        namespace: str,
        user: str,
        texts: Sequence[str],
        limit: int,
        terms: Iterable[str],
        *,
        scoring: ScoringConfig,
        clock: Callable[[], datetime],
        timeout: float,
    ) -> tuple[list[list[ScoredNode]], dict[str, float]]:
        """The subject's memories ranked for each of ``texts`` as a query would rank
        them (the vector state caught up once, no access counted), and the idf of
        ``terms`` among them: what the likely-update detector weighs earlier memories by."""
        token = self._caught_up(namespace, user, self._token(namespace, user), timeout)
        served = self._serve(namespace, user, scoring, token)
        if served is None:
            return [[] for _ in texts], {}
        index, embedder = served
        vectors = embedder.embed(list(texts))
        now = clock()
        ranked = [
            rank(index, text, vector, now, NodeFilter(), limit)
            for text, vector in zip(texts, vectors, strict=True)
        ]
        with index.lock:
            return ranked, index.lexical.idf(terms)

    def _count_accesses(
        self, index: SubjectIndex, results: list[ScoredNode], now: datetime
    ) -> None:
        """Count the returned nodes: in the cached index at once (this process's next
        query sees them), in the store with the writer thread's next batch
        (projections.access)."""
        if not results:
            return
        index.count_accesses([scored.node.id for scored in results])
        self.access.record(index.stream_id, (scored.node for scored in results), now)

    def _token(
        self, namespace: str, user: str, follower: Follower | None = None
    ) -> StateToken | None:
        subject_key = self.store.subject_key(namespace, user)
        followed = None if follower is None else follower.name
        # Statements that need no common snapshot: no transaction around them.
        with self.store.reading(snapshot=False) as view:
            return state_token(
                view.connection,
                self.store.backend.fetch,
                namespace,
                subject_key,
                self.projection,
                followed,
            )

    def _caught_up(
        self,
        namespace: str,
        user: str,
        token: StateToken | None,
        timeout: float,
        follower: Follower | None = None,
    ) -> StateToken | None:
        """The subject's state token once ``follower`` (if named when ``token`` was
        read) and the vector state have applied the stream's last event (what
        :meth:`wait` does, with no further query when nothing is pending)."""
        if token is None or not token.readable:
            return token
        if follower is not None and not token.followed:
            judged = token.follower_mark or 0
            followed = follower.catch_up_stream(
                token.stream_id, token.version, timeout, judged=judged
            )
            if followed is None:
                raise NotCaughtUpError()
            if followed.may_have_appended:
                # Reread: the follower may have appended to the stream (a likely update).
                token = self._token(namespace, user)
                if token is None or not token.readable:
                    return token
            else:
                token = token.followed_now()
        if token.caught_up:
            return token
        if not self.runner.catch_up_stream(token.stream_id, token.version, timeout):
            raise NotCaughtUpError()
        return token.caught_up_now()

    def _serve(
        self,
        namespace: str,
        user: str,
        scoring: ScoringConfig,
        token: StateToken | None,
    ) -> tuple[SubjectIndex, Embedder] | None:
        """The subject's index as of ``token``, from the cache while that still matches or
        the change is new events only (then applied to it), and the embedder its
        vectors come from (queries must be embedded by the same); ``None`` (and
        nothing cached) once the subject is forgotten.

        The token is read before the rows it guards (see projections.storage.vector_reads):
        rows committed in between only make the index newer than its token, so the
        next query reads them again; they never leave an erased row in the cache.
        """
        cached = cache_key(namespace, user)
        if token is None or not token.readable:
            self.cache.drop(cached)
            return None
        embedder = self._serving_embedder(token)
        entry = self.cache.entry(cached)
        if entry is not None and entry[0] == token:
            return entry[1], embedder
        if entry is None:  # a cold start: the subject's image, if it has a usable one
            entry = self._imaged(token, scoring)
        follows = entry is not None and _only_new_events(entry[0], token)
        with self.store.reading() as view:
            # The events to apply (none for a load) and the key, in the view's first
            # two statements: on PostgreSQL the first goes out with the view's BEGIN.
            applied = entry[0].version if follows and entry is not None else token.version
            events, ciphers = view.stream_since(token.stream_id, applied, token.version)
            cipher = ciphers.get(token.stream_id)
            if cipher is None:
                self.cache.drop(cached)
                return None
            if follows and entry is not None and _contiguous(events, entry[0], token):
                index = entry[1]
                try:
                    refresh(index, view.connection, cipher, events, token.embedder)
                except BaseException:
                    self.cache.drop(cached)  # half applied: never serve or extend it
                    raise
            else:
                index = load_subject(view.connection, cipher, scoring, token.embedder)
                index.version = token.version  # rows read after the token: at least this
                index.set_accesses(self.access.counts(view.connection, token.stream_id))
                self.images.offer(token, index)
        self.cache.put(cached, token, index)
        return index, embedder

    def _imaged(
        self, token: StateToken, scoring: ScoringConfig
    ) -> tuple[StateToken, SubjectIndex] | None:
        """The subject's index from its image and the token it reflects, with the access
        counts read now (they change on reads, not events); ``None`` without one."""
        with self.store.reading() as view:
            cipher = view.cipher(token.stream_id)
            imaged = (
                None
                if cipher is None
                else self.images.load(view.connection, cipher, token, scoring)
            )
            if imaged is not None:
                imaged[1].set_accesses(self.access.counts(view.connection, token.stream_id))
        return imaged

    def save_images(self) -> None:
        """Write the image of each cached subject that has moved past its image (and wait
        for every image being written): what ``close`` does, so the next process's
        first query loads what this one built."""
        for subject in self.cache.subjects:
            entry = self.cache.entry(subject)
            if entry is not None and entry[0].caught_up:
                self.images.offer(entry[0], entry[1])
        self.images.wait()

    def _serving_embedder(self, token: StateToken) -> Embedder:
        """The embedder of the token's vectors; built (once) if a re-embedding job made it so."""
        built = self.embedders.built(token.embedder)
        if built is not None:
            return built
        with self.store.reading() as view:
            return self.embedders.serving(view.connection, token.embedder)

    # -- retrieval modifiers ------------------------------------------------------------

    def trigger_ids(self, stream_id: int) -> set[uuid.UUID]:
        """Ids of the resonance triggers of a stream's vector state."""
        with self.store.reading() as view:
            cipher = view.cipher(stream_id)
            if cipher is None:
                return set()
            return {
                row.trigger_id for row, _ in VectorStore(view.connection).stream_triggers(cipher)
            }

    def attractor_count(self, stream_id: int) -> int:
        """How many negative attractors a stream's vector state holds."""
        with self.store.reading() as view:
            return VectorStore(view.connection).count_attractors(stream_id)


def cache_key(namespace: str, user: str) -> str:
    """Whose index a cache entry holds: one cache serves every namespace of a server,
    and a namespace cannot contain ``/``."""
    return f"{namespace}/{user}"


def _only_new_events(cached: StateToken, token: StateToken) -> bool:
    """Whether ``token`` differs from ``cached`` by later events of the same stream
    only (or none: an image of exactly the token's state), with the vector state
    caught up on both: what :func:`refresh` can apply."""
    return (
        cached.stream_id == token.stream_id
        and cached.embedder == token.embedder
        and cached.erasures == token.erasures
        and cached.rebuilds == token.rebuilds
        and cached.graph_marked == token.graph_marked
        and cached.version <= token.version
        and cached.caught_up
        and token.caught_up
    )


def _contiguous(events: list[RecordedEvent], cached: StateToken, token: StateToken) -> bool:
    """The events read are exactly the versions between the two tokens, and all of
    a kind the index can apply."""
    versions = [e.version for e in events]
    return versions == list(range(cached.version + 1, token.version + 1)) and refreshable(events)
