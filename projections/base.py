"""The projection port: what every projection does for the workers that run,
erase, rebuild and certify it.

A projection is a named, versioned function of the log kept in tables.  The
eraser, the rebuild worker, replay and certificates reach projections only
through this port and the registry the composition root builds
(``projections.registry``): none of them names a projection, so adding one
touches its own module and the registry only.
"""

from __future__ import annotations

import hashlib
import itertools
import uuid
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.engine import Connection

from eventstore import RecordedEvent, SubjectCipher
from projections.digest import state_digest

if TYPE_CHECKING:
    from projections.parts import Part

#: An item of a projection's state: the id that places it in a part (an event or
#: node id, see ``projections.parts``) and its digest.
Anchored = tuple[uuid.UUID, str]

#: Events a replay hands a projection at once (``apply_page``): large enough that
#: an embedding projection embeds many texts per call, small enough to bound memory.
REPLAY_PAGE = 500


class StreamView(Protocol):
    """A connection to the store's tables and the ciphers of its streams: what a
    projection digests its state through (an ``eventstore.ReadView`` is one)."""

    @property
    def connection(self) -> Connection: ...

    def cipher(self, stream_id: int) -> SubjectCipher | None: ...


class StreamSource(StreamView, Protocol):
    """What a projection may read of one locked stream while it purges or replays it
    (a ``eventstore.Transaction`` is one)."""

    def get_events(self, event_ids: list[uuid.UUID]) -> list[RecordedEvent]: ...

    def read_stream_id(self, stream_id: int, after_version: int = 0) -> Iterable[RecordedEvent]: ...


class Projection(Protocol):
    """A named, versioned function of the log, kept in tables.

    ``apply`` is called with events in log order within one stream;
    ``apply_page`` with a page of them (of any streams, each with its stream's
    cipher), so a projection can batch its work, and must leave the state that
    applying them one by one would: a replay (``replay`` below) hands it a
    subject's remaining events in such pages.  ``purge`` removes everything
    derived from one stream; ``purge_events`` makes the stream's rows what a
    replay without the given events gives (or removes what those events
    contributed and leaves the rest to the rebuild job that proves it).
    ``anchored_digests`` digests each item of one stream's state (or of one
    part of it) with the event or node id that places it in a part;
    ``item_digests`` and ``digest`` compose them (see ``compose_digests``), so a
    live projection can be compared with a fresh replay, and an item's change
    changes one term.  ``replay_part`` re-derives one closed part from its
    remaining events (what a certified delete proves, projections.proofs), and
    ``snapshot_basis`` names what besides the log a replay depends on (an
    embedder, an extractor): a snapshot replayed on another basis is not reused.
    ``time_spans`` gives the bounds of what a stream's items (or those of given
    events) were recorded at and took effect at, which an erasure certificate
    states, read before the purge; a projection that keeps no times gives none.
    """

    name: str
    version: int

    def apply(self, conn: Connection, cipher: SubjectCipher, event: RecordedEvent) -> None: ...

    def apply_page(
        self, conn: Connection, page: Sequence[tuple[SubjectCipher, RecordedEvent]]
    ) -> None: ...

    def purge(self, conn: Connection, stream_id: int) -> None: ...

    def purge_events(
        self, source: StreamSource, stream_id: int, erased: Sequence[RecordedEvent]
    ) -> None:
        """Called after ``erased`` (read before they were erased, with their data) became
        tombstones, in the erasing transaction."""
        ...

    def anchored_digests(
        self, view: StreamView, stream_id: int, part: Part | None = None
    ) -> list[Anchored]:
        """Each item (of ``part`` only, if given: those anchored in it) with its anchor."""
        ...

    def item_digests(self, view: StreamView, stream_id: int) -> list[str]:
        return [digest for _, digest in self.anchored_digests(view, stream_id)]

    def replay_part(self, source: StreamSource, stream_id: int, part: Part) -> bool:
        """Make ``part``'s rows what a replay of its remaining events gives; False when
        this projection cannot bound the replay to it (the caller replays the stream)."""
        ...

    def snapshot_basis(self, conn: Connection, stream_id: int) -> str: ...

    def time_spans(
        self, conn: Connection, stream_id: int, event_ids: Collection[uuid.UUID] | None = None
    ) -> dict[str, datetime | None]:
        return {}

    def digest(self, view: StreamView, stream_id: int) -> str:
        return compose_digests(self.item_digests(view, stream_id))


class SubjectCache(Protocol):
    """Derived state kept per stream that is no projection: no replay rebuilds it and
    no digest covers it (an image of the retrieval index, projections.index_image).
    It must never outlive what it was derived from, so the registry purges a
    stream's whole cache whenever any of its events is erased or it is forgotten,
    in the erasing transaction."""

    def purge(self, conn: Connection, stream_id: int) -> None: ...


def item_digest(kind: str, item: Any) -> str:
    """The digest of one item of a projection's state (a node, an edge, a vector …)."""
    return state_digest({"kind": kind, "item": item})


def compose_digests(items: Iterable[str]) -> str:
    """A subject's state digest from its items' digests, in any order.

    SHA-256 over the sorted item digests: adding, changing or removing one
    item changes one term, and a digest kept per item lets a later one be
    computed without reading the other items' rows again.
    """
    return hashlib.sha256("\n".join(sorted(items)).encode()).hexdigest()


def replay(source: StreamSource, projections: Iterable[Projection], stream_id: int) -> int:
    """Purge and re-apply one stream's remaining events to each projection; the events
    applied (none when the stream's key was destroyed)."""
    chosen = list(projections)
    conn, cipher = source.connection, source.cipher(stream_id)
    for projection in chosen:
        projection.purge(conn, stream_id)
    if cipher is None:
        return 0
    remaining = ((cipher, e) for e in source.read_stream_id(stream_id) if e.data is not None)
    applied = 0
    while page := list(itertools.islice(remaining, REPLAY_PAGE)):
        for projection in chosen:
            projection.apply_page(conn, page)
        applied += len(page)
    return applied
