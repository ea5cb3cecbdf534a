"""The projections of a store, built once by the composition root (``oblivio.bootstrap``).

Erasure, rebuilds, replay and certificates iterate over this registry; none of
them names a projection.  A projection is either *inline* (applied in the
appending transaction) or *asynchronous* (applied after commit by a
``workers.projector.ProjectionRunner`` from checkpoints partitioned by stream
id): the registry knows which, so it can hold an asynchronous projection still
while an erasure or a digest reads its rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime

from sqlalchemy.engine import Connection

from eventstore import LogCursor, RecordedEvent
from projections.base import Projection, StreamSource, SubjectCache
from projections.storage import checkpoints, snapshot_store, stream_marks
from projections.storage.access_store import AccessStore


class ProjectionRegistry:
    """Every projection of the store, inline ones first.

    That order is the erasure's: an asynchronous projection may keep what
    the inline ones still hold (the vector state keeps the vectors of nodes the
    graph still has), so the inline ones are brought up to date first.
    """

    def __init__(
        self,
        inline: Sequence[Projection],
        asynchronous: Sequence[tuple[Projection, int]] = (),
        caches: Sequence[SubjectCache] = (),
        marked_followers: Sequence[str] = (),
    ) -> None:
        self._all = [*inline, *(p for p, _ in asynchronous)]
        #: Derived state that is no projection, purged with any erasure of its stream.
        self._caches = list(caches)
        #: Names of log followers that are no projection but keep per-stream marks (the
        #: likely-update detector, which appends its decisions to the stream).
        self._marked_followers = list(marked_followers)
        #: name → partitions of its checkpoints, for asynchronous projections only.
        self._partitions = {p.name: partitions for p, partitions in asynchronous}
        names = [p.name for p in self._all]
        if len(set(names)) != len(names):
            raise ValueError(f"projection names must be unique: {names}")

    def __iter__(self) -> Iterator[Projection]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def named(self, name: str) -> Projection:
        """The projection called ``name`` (``KeyError`` for none)."""
        for projection in self._all:
            if projection.name == name:
                return projection
        raise KeyError(name)

    def versions(self) -> list[tuple[str, int]]:
        """(name, version) of each projection, as rebuild jobs record them."""
        return [(p.name, p.version) for p in self._all]

    # -- asynchronous projections' checkpoints ---------------------------------

    def hold(self, conn: Connection, stream_id: int) -> None:
        """Wait for and lock the stream's checkpoint partition and the stream's mark of
        each asynchronous projection: no runner batch and no read's catch-up can
        re-insert rows the caller purges (one that committed before is purged with
        the rest; the next one sees the purge).  The stream's marks of the other
        followers that keep some are held too: one that waited for this sees the
        stream erased, and does not mark a forgotten stream again."""
        for name, partitions in self._partitions.items():
            checkpoints.hold(conn, name, stream_id % partitions)
            stream_marks.lock(conn, name, [stream_id])
        for name in self._marked_followers:
            stream_marks.lock(conn, name, [stream_id])

    def holds_complete_state(
        self, conn: Connection, name: str, stream_id: int, position: LogCursor
    ) -> bool:
        """Whether the live rows of ``name`` are the projection of the whole stream up to
        ``position``, as kept incrementally.

        Inline projections always are.  An asynchronous one is once the stream's
        mark has reached ``position``; its partition and the mark are held (as
        :meth:`hold` holds them) so no runner batch or catch-up changes the rows
        while the caller digests them.
        """
        partitions = self._partitions.get(name)
        if partitions is None:
            return True
        partition = stream_id % partitions
        checkpoints.hold(conn, name, partition)
        # Held, not created: after a forget the stream's mark is gone for good.
        mark = stream_marks.held(conn, name, stream_id)
        if mark.version == 0:
            # Nothing marked: a forgotten stream (its mark purged with its rows; no
            # applier marks one again), complete once the runner passed its tombstones,
            # as before the marks.  A live stream's events are marked when applied.
            return checkpoints.read(conn, name, partition) >= position
        return mark.cursor >= position

    # -- erasure ---------------------------------------------------------------

    def time_spans(
        self, conn: Connection, stream_id: int, event_ids: Collection[uuid.UUID] | None = None
    ) -> dict[str, datetime | None]:
        """The bounds of when the stream's memories (or those of ``event_ids``) were
        recorded and took effect, as the projections that keep times give them (read
        before a purge; an erasure certificate states them)."""
        spans: dict[str, datetime | None] = {}
        for projection in self._all:
            spans |= projection.time_spans(conn, stream_id, event_ids)
        return spans

    def purge_subject(self, conn: Connection, stream_id: int) -> None:
        """Remove everything derived from one stream, in every projection.

        Retrieval's access counts go too: they are no projection (no event
        records a read, so no replay rebuilds them, and rebuilds leave them
        alone), but they count the subject's nodes.  The stream's snapshots and
        erased parts go too: sealed under the key being destroyed, they are the
        subject's.  So do the stream's marks: nothing of it is applied again (its
        events read back erased), and no applier writes one for it again.
        """
        for projection in self._all:
            projection.purge(conn, stream_id)
        for cache in self._caches:
            cache.purge(conn, stream_id)
        AccessStore(conn).purge_stream(stream_id)
        snapshot_store.purge_stream(conn, stream_id)
        stream_marks.purge_stream(conn, stream_id)

    def purge_events(
        self, source: StreamSource, stream_id: int, erased: Sequence[RecordedEvent]
    ) -> None:
        """Take what ``erased`` (read before erasure) contributed out of every projection,
        the access counts of the nodes they derived, and the stream's caches."""
        for projection in self._all:
            projection.purge_events(source, stream_id, erased)
        for cache in self._caches:
            cache.purge(source.connection, stream_id)
        AccessStore(source.connection).purge_events(stream_id, [e.event_id for e in erased])
