"""The likely-update detector: after commit, decides whether a person's new memory
likely updates an earlier one of theirs, and records the decision as an event.

A log follower with its own checkpoints, like the claims extraction worker.
Per stored memory (``store()`` or an ingested message) of a person's own
words, it asks the retrieval service for the person's memories nearest the new
one (the vector state caught up, so the earlier ones are there), weighs them
with :mod:`projections.updates`, and when the evidence suffices appends one
``memory.likely_update`` event to the person's stream, applied inline by the
node graph like every memory event.  Judging runs before the transaction, so
nothing slow holds a lock; the transaction claims the partition's checkpoint,
checks under the stream's lock that both memories still stand, and appends.
The event's id is a function of the new memory's event, so a page done twice
appends it once, and erasing the memory erases the decision with it.

Subjects the detector must leave alone (an automated decision a restriction of
processing excludes) are skipped in :meth:`LikelyUpdateWorker.skips`, the one
place that decides it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from eventstore import ANY, EventStore, LogCursor, NewEvent, RecordedEvent, Transaction
from eventstore.ids import SYSTEM_NAMESPACE
from eventstore.store import utc_now
from projections import events as ev
from projections import updates
from projections.graph import NodeGraphProjection
from projections.model import LifecycleState, NodeType, ScoredNode
from projections.retrieval_service import RetrievalService
from projections.scoring import ScoringConfig
from projections.storage.graph_store import GraphStore
from workers.follower import FollowedPage, LogFollower

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
        judged = self._judge_page(page.events)
        # A page that decides nothing writes only its checkpoint: projection state the
        # log replays, so its commit need not wait for the disk (docs/architecture.md).
        with self.store.transaction(durable=bool(judged)) as tx:
            # Moved first, so that the decisions commit with it or not at all.
            if not self.move_checkpoint(tx, partition, cursor, page.next_cursor):
                return None
            for found in judged:
                self._record(tx, found)
        # Nothing judged, nothing appended: a consistent read then need not look again.
        return FollowedPage(len(page.events), page.next_cursor, appended=bool(judged))

    def _judge_page(self, events: list[RecordedEvent]) -> list[_Judged]:
        """The decisions about a page's new memories: those that hold evidence of a
        change are looked up together, one retrieval index read per person."""
        asked: dict[tuple[str, str], list[RecordedEvent]] = {}
        for event in events:
            data = event.data or {}
            if not self.skips(event) and updates.may_update(data["content"]):
                asked.setdefault((event.stream.namespace, data["user_id"]), []).append(event)
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

    def _record(self, tx: Transaction, judged: _Judged) -> None:
        """Append the decision, if both memories still stand (under the stream's lock)."""
        event, decision = judged.event, judged.decision
        stream = tx.lock_stream(event.stream.stream_id)
        if stream is None or stream.closed_at is not None:
            return  # forgotten since
        if tx.processing_restricted(stream):
            return  # restricted since it was judged (Art. 18): decide nothing
        store = GraphStore(tx.connection)
        rows = {r.node_id: r for r in store.node_rows([decision.old_node_id, judged.new_node_id])}
        old = rows.get(decision.old_node_id)
        if judged.new_node_id not in rows or old is None:
            return  # erased since
        if old.lifecycle == LifecycleState.SUPERSEDED:
            return  # retired since: its successor is known already
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
        if stream.version != version_before:  # not a replay of an earlier append
            self.graph.apply(tx.connection, tx.locked_cipher(stream), recorded)
