"""The likely-update detector: after commit, decides whether a person's new memory
likely updates an earlier one of theirs, and records the decision as an event.

A log follower with its own checkpoints, like the claims extraction worker.
Per stored memory (``store()`` or an ingested message) of a person's own
words, it asks the retrieval service for the person's memories nearest the new
one (the vector state caught up, so the earlier ones are there), weighs them
with :mod:`projections.updates`, and when the evidence suffices appends one
``memory.likely_update`` event to the person's stream, applied inline by the
node graph like every memory event.  Judging runs before the transaction, so
nothing slow holds a lock; the transaction records the decisions under the
stream's lock, after checking that both memories still stand.
The event's id is a function of the new memory's event, so a memory judged twice
appends its decision once, and erasing the memory erases the decision with it.

What is judged of each stream is the detector's mark (``projection_stream_marks``
under its own name, as the vector state's runner keeps its own): both ways in,
a partition's page (:meth:`LikelyUpdateWorker.follow_page`) and a consistent
read's catch-up of its own stream (:meth:`LikelyUpdateWorker.catch_up_stream`,
by stream id: on Citus its one shard, committed one-phase unless it appends a
decision, whose append checks other shards), skip the events at or
before a stream's mark and record through :meth:`LikelyUpdateWorker._record_marked`,
which locks the marks, drops a decision another already recorded and moves the
marks, in one transaction: a decision is recorded once, whoever reaches the
memory first.  A mark moves past the decisions its transaction appends when
nothing else came between, so a stream the detector wrote to last reads as judged.

Subjects the detector must leave alone (an automated decision a restriction of
processing excludes) are skipped in :meth:`LikelyUpdateWorker.skips`, the one
place that decides it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Connection

from eventstore import (
    ANY,
    EventStore,
    LockedStream,
    LogCursor,
    NewEvent,
    RecordedEvent,
    SubjectCipher,
    Transaction,
)
from eventstore.errors import OperationalError
from eventstore.ids import SYSTEM_NAMESPACE
from eventstore.store import utc_now
from projections import events as ev
from projections import updates
from projections.graph import NodeGraphProjection
from projections.model import LifecycleState, NodeType, ScoredNode
from projections.retrieval_service import RetrievalService
from projections.scoring import ScoringConfig
from projections.storage import stream_marks
from projections.storage.graph_store import GraphStore
from projections.storage.stream_marks import StreamMark
from workers.follower import CaughtUp, FollowedPage, LogFollower

NAME = "likely_updates"
DEFAULT_BATCH_SIZE = 200
#: How many of the person's nearest memories are weighed.
CANDIDATES = 20


@dataclass(frozen=True)
class _Judged:
    event: RecordedEvent
    new_node_id: uuid.UUID
    decision: updates.Decision


class LikelyUpdateWorker(LogFollower):
    """Follows the log and records likely updates (see the module docstring)."""

    name = NAME

    def __init__(
        self,
        store: EventStore,
        graph: NodeGraphProjection,
        retrieval: RetrievalService,
        scoring: ScoringConfig,
        *,
        partitions: int,
        catch_up_seconds: float,
        batch_size: int = DEFAULT_BATCH_SIZE,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.graph = graph
        self.retrieval = retrieval
        self.scoring = scoring
        #: How long judging waits for the vector state to include the new memory: the
        #: memory context's consistency timeout (``MemoryContext.consistency_timeout``),
        #: since a consistent read that waits for this detector waits for that too.
        self.catch_up_seconds = catch_up_seconds
        self.batch_size = batch_size
        super().__init__(store, NAME, partitions=partitions, threads=1, clock=clock)

    def skips(self, event: RecordedEvent) -> bool:
        """Whether ``event`` is left alone: anything but a live memory in a person's own
        words (assistant turns, keyed items, the system's streams).  The one place a
        subject is excluded from this automated decision."""
        data = event.data
        return (
            event.type != ev.STORED
            or data is None
            or event.stream.namespace == SYSTEM_NAMESPACE
            or data.get("role", "user") != "user"
            or ev.item_of(data) is not None
        )

    def follow_page(self, partition: int, after: LogCursor | None = None) -> FollowedPage | None:
        cursor = self.checkpoint(partition) if after is None else after
        page = self.read_page(partition, cursor, self.batch_size)
        judged = self._judge_page(self._unjudged(page.events))
        # A page that decides nothing writes only its checkpoint and marks: state the
        # log replays, so its commit need not wait for the disk (docs/architecture.md).
        with self.store.transaction(durable=bool(judged)) as tx:
            # Moved first, so that the decisions commit with it or not at all.
            if not self.move_checkpoint(tx, partition, cursor, page.next_cursor):
                return None
            self._record_marked(tx, page.events, page.ciphers, judged)
        # Nothing judged, nothing appended: a consistent read then need not look again.
        return FollowedPage(len(page.events), page.next_cursor, appended=bool(judged))

    def catch_up_stream(
        self, stream_id: int, version: int, timeout: float, *, judged: int
    ) -> CaughtUp | None:
        """Judge the stream's memories after version ``judged`` (its mark, as the caller
        just read it) up to ``version``, record the decisions and move the mark, in one
        transaction of the stream's own rows: what a consistent ranked read waits for.
        ``None`` if ``timeout`` (seconds) is not positive or a page or an erasure
        holding the mark outlasts it.

        It reads the stream by stream id, never a page of the log partition (on
        Citus every shard); an event a page judged meanwhile is not recorded twice.
        """
        if timeout <= 0:
            return None
        deadline = time.monotonic() + timeout
        # No snapshot needed: a key destroyed after the events were read reads as
        # forgotten, and the transaction checks again what it records.
        with self.store.reading(snapshot=False) as view:
            read = view.stream_since(stream_id, judged, version)
        if read.ciphers.get(stream_id) is None:
            return CaughtUp(may_have_appended=False)  # forgotten: nothing left to judge
        decided = self._judge_page(read.events)
        try:
            with self.store.transaction(durable=bool(decided)) as tx:
                stream_marks.bound_lock_waits(tx.connection, self.store.backend.fetch, timeout)
                self._record_marked(tx, read.events, read.ciphers, decided)
        except OperationalError:
            if time.monotonic() < deadline:
                raise  # not the lock wait given up at the deadline
            return None
        return CaughtUp(may_have_appended=bool(decided))

    def _asks(self, event: RecordedEvent) -> bool:
        """Whether ``event`` is a memory to judge: not skipped, with evidence of a change."""
        return not self.skips(event) and updates.may_update((event.data or {})["content"])

    def _unjudged(self, events: list[RecordedEvent]) -> list[RecordedEvent]:
        """The memories to judge among a page's ``events``: those past their stream's mark
        (a read's catch-up may have judged them).  The marks are read only for streams
        with a memory to judge, the rare case, and not locked: recording checks again."""
        asking = [e for e in events if self._asks(e)]
        if not asking:
            return []
        with self.store.reading(snapshot=False) as view:
            marks = stream_marks.versions(
                view.connection, self.name, {e.stream.stream_id for e in asking}
            )
        return [e for e in asking if e.version > marks.get(e.stream.stream_id, 0)]

    def _judge_page(self, events: list[RecordedEvent]) -> list[_Judged]:
        """The decisions about a page's new memories: those that hold evidence of a
        change are looked up together, one retrieval index read per person."""
        asked: dict[tuple[str, str], list[RecordedEvent]] = {}
        for event in events:
            if self._asks(event):
                user = (event.data or {})["user_id"]
                asked.setdefault((event.stream.namespace, user), []).append(event)
        judged: list[_Judged] = []
        for (namespace, user), theirs in asked.items():
            if self.store.processing_restricted(namespace, user):
                continue  # Art. 18: no automated decision about a restricted person
            texts = [(e.data or {})["content"] for e in theirs]
            ranked, idf = self.retrieval.neighbours(
                namespace,
                user,
                texts,
                CANDIDATES,
                set().union(*map(updates.stems_of, texts)),
                scoring=self.scoring,
                clock=self.clock,
                timeout=self.catch_up_seconds,
            )
            for event, nearest in zip(theirs, ranked, strict=True):
                if found := self._judge(event, nearest, idf):
                    judged.append(found)
        return judged

    def _judge(
        self, event: RecordedEvent, ranked: list[ScoredNode], idf: dict[str, float]
    ) -> _Judged | None:
        """The decision about one new memory, given the person's memories nearest it."""
        data = event.data or {}
        node_ids = self.graph.node_ids(event)
        if not node_ids:
            return None
        text = data["content"]
        # An earlier-effective memory never updates a later one (a back-dated store).
        effective = ev.effective_at(data, event.recorded_at)
        candidates = [
            updates.Candidate(s.node.id, s.node.content)
            for s in ranked
            if s.node.event_id != event.event_id
            and s.node.created_at <= event.recorded_at
            and s.node.occurred_at <= effective
            and s.node.scope.value == data["scope"]
            and s.node.node_type is not NodeType.ENTITY
            and "claim_predicate" not in s.node.meta
        ]
        decision = updates.detect(text, candidates, idf)
        return None if decision is None else _Judged(event, node_ids[0], decision)

    def _record_marked(
        self,
        tx: Transaction,
        events: Sequence[RecordedEvent],
        ciphers: Mapping[int, SubjectCipher | None],
        judged: list[_Judged],
    ) -> None:
        """Record ``judged`` (decisions about some of ``events``, read with ``ciphers``)
        and move the detector's marks of the streams read past ``events``, in ``tx``.

        The streams decided about are locked first, then the marks, the order an
        erasure takes them in (``ProjectionRegistry.hold``).  A decision about an
        event at or before its stream's locked mark is dropped: another way in
        judged that event first and recorded its own.
        """
        last_read = _last_read(events, ciphers)
        locked = {s: tx.lock_stream(s) for s in sorted({j.event.stream.stream_id for j in judged})}
        marks = self._lock_marks(tx.connection, last_read.keys(), locked)
        # Before the appends (a locked stream's version follows them).
        heads = {s: stream.version for s, stream in locked.items() if stream is not None}
        appended: dict[int, RecordedEvent] = {}
        for found in judged:
            stream_id = found.event.stream.stream_id
            stream, mark = locked[stream_id], marks.get(stream_id)
            if stream is None or mark is None or found.event.version <= mark.version:
                continue  # forgotten, or judged by the other way in first
            if recorded := self._record(tx, stream, found):
                appended[stream_id] = recorded
        moved = {
            stream_id: judged_to
            for stream_id, mark in marks.items()
            if (judged_to := _judged_to(last_read[stream_id], heads, appended)).version
            > mark.version
        }
        stream_marks.advance(tx.connection, self.name, moved, self.store.backend.write_at_commit)

    def _lock_marks(
        self,
        conn: Connection,
        stream_ids: Collection[int],
        locked: Mapping[int, LockedStream | None],
    ) -> dict[int, StreamMark]:
        """Lock the detector's marks of ``stream_ids``; those of the streams that still
        stand (``locked``: some of them, locked already).

        A mark at version 0 is new, or was made again by the lock for a stream a
        forget purged while this waited for the mark (an erasure holds it): a
        forgotten stream's mark goes again, and stays gone.
        """
        marks = stream_marks.lock(conn, self.name, stream_ids)
        fresh = {s for s, mark in marks.items() if mark.version == 0}
        gone = stream_marks.closed_among(conn, fresh - locked.keys()) | {
            s for s, stream in locked.items() if stream is None or stream.closed_at is not None
        }
        stream_marks.drop(conn, self.name, gone)
        return {s: mark for s, mark in marks.items() if s not in gone}

    def _record(
        self, tx: Transaction, stream: LockedStream, judged: _Judged
    ) -> RecordedEvent | None:
        """Append the decision, if both memories still stand (``stream`` is its stream,
        locked): the event appended, ``None`` if nothing was."""
        event, decision = judged.event, judged.decision
        if stream.closed_at is not None:
            return None  # forgotten since
        if tx.processing_restricted(stream):
            return None  # restricted since it was judged (Art. 18): decide nothing
        store = GraphStore(tx.connection)
        rows = {r.node_id: r for r in store.node_rows([decision.old_node_id, judged.new_node_id])}
        old = rows.get(decision.old_node_id)
        if judged.new_node_id not in rows or old is None:
            return None  # erased since
        if old.lifecycle == LifecycleState.SUPERSEDED:
            return None  # retired since: its successor is known already
        data = ev.with_checksum(
            {
                "old_node_id": str(decision.old_node_id),
                "new_node_id": str(judged.new_node_id),
                "source_event_id": str(event.event_id),
                "detector": decision.detector,
                "version": decision.version,
                "rule": decision.rule,
                "cues": list(decision.cues),
                "confidence": decision.confidence,
                "decided_at": self.clock().isoformat(),
            }
        )
        new_event = NewEvent(
            ev.LIKELY_UPDATE, data, event_id=ev.likely_update_event_id(event.event_id)
        )
        version_before = stream.version
        [recorded] = tx.append_locked(stream, [new_event], ANY)
        if stream.version == version_before:
            return None  # a replay of an earlier append
        self.graph.apply(tx.connection, tx.locked_cipher(stream), recorded)
        return recorded


def _last_read(
    events: Sequence[RecordedEvent], ciphers: Mapping[int, SubjectCipher | None]
) -> dict[int, RecordedEvent]:
    """The last of ``events`` of each stream the detector marks: a person's, whose key
    lives (a forgotten stream gets no mark; the system's streams hold no memories)."""
    last: dict[int, RecordedEvent] = {}
    for event in events:  # each stream's in version order
        stream_id = event.stream.stream_id
        if event.stream.namespace != SYSTEM_NAMESPACE and ciphers.get(stream_id) is not None:
            last[stream_id] = event
    return last


def _judged_to(
    last: RecordedEvent, heads: Mapping[int, int], appended: Mapping[int, RecordedEvent]
) -> StreamMark:
    """Where a stream's mark moves once ``last`` (its last event read) is judged: past the
    decision appended to it too when nothing came between (its head, locked, was
    ``last``), so that a stream the detector wrote to last reads as judged."""
    stream_id = last.stream.stream_id
    decision = appended.get(stream_id)
    if decision is not None and heads.get(stream_id) == last.version:
        return StreamMark(decision.version, decision.cursor)
    return StreamMark(last.version, last.cursor)
