"""The extraction worker: turns ingested messages into claims, with its own checkpoint.

It follows the log partition by partition like the projection runner (both
are ``workers.follower.LogFollower``s), but it writes to the log: per
ingested message, one append of one claims event to the owner's stream (the
saved plan, its claims, any retirements: the message's whole derivation in
one atomic record), projected inline by the node graph like every other
memory event, before the next message of the stream is published, so each
message sees the claims of the ones before it.  The append uses "any" as its
expected version, because callers keep appending to the same streams; the
stream lock it holds is what keeps its reads of earlier claims valid until
it appends.

Extraction itself (a rule set, or a call to a chat endpoint) runs before the
transaction, so a slow extractor holds no lock.  The transaction then claims
the partition's checkpoint and only proceeds if the checkpoint is still
where the page was read from; otherwise another worker got there first and
this batch is dropped, unwritten.  A page's appends commit together with the
checkpoint that passes them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import datetime

from pydantic import ValidationError

from eventstore import (
    ANY,
    EventStore,
    LockedStream,
    LogCursor,
    NewEvent,
    RecordedEvent,
    Transaction,
    subject_rights,
)
from eventstore.errors import InvalidInputError
from eventstore.ids import SYSTEM_NAMESPACE
from eventstore.store import utc_now
from projections import events as ev
from projections.claims.plan import ClaimExtractor, IngestionPlan, Message, validate_plan
from projections.claims.publication import claims_event
from projections.graph import NodeGraphProjection
from projections.reads import GraphReads
from workers.follower import FollowedPage, LogFollower

log = logging.getLogger(__name__)

NAME = "claims_extraction"
DEFAULT_BATCH_SIZE = 200


def is_ingested(event: RecordedEvent) -> bool:
    """A live message stored by ``ingest()`` (``store()`` never yields claims)."""
    return (
        event.type == ev.STORED
        and event.data is not None
        and "ingest" in event.data
        and event.stream.namespace != SYSTEM_NAMESPACE
    )


class ExtractionWorker(LogFollower):
    """Runs a claim extractor over the log from its checkpoints."""

    name = NAME

    def __init__(
        self,
        store: EventStore,
        graph: NodeGraphProjection,
        extractor: ClaimExtractor,
        *,
        partitions: int,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int = 1,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.graph = graph
        self.extractor = extractor
        self.batch_size = batch_size
        super().__init__(store, NAME, partitions=partitions, threads=threads, clock=clock)

    def follow_page(self, partition: int, after: LogCursor | None = None) -> FollowedPage | None:
        """Extract one page of a partition: the events read and the checkpoint after
        them (appended: it published claims); ``None`` when another worker moved it first."""
        cursor = self.checkpoint(partition) if after is None else after
        page = self.store.read_all(cursor, self.batch_size, partition=(partition, self.partitions))
        if not page.events:
            return FollowedPage(0, cursor)
        ingested = [e for e in page.events if is_ingested(e)]
        restricted = self._restricted(
            {(e.stream.namespace, e.stream.subject_key) for e in ingested}
        )
        plans = {
            e.event_id: self._plan(e)
            for e in ingested
            if (e.stream.namespace, e.stream.subject_key) not in restricted
        }
        by_stream: dict[int, list[RecordedEvent]] = {}
        for event in page.events:
            if event.event_id in plans:
                by_stream.setdefault(event.stream.stream_id, []).append(event)
        with self.store.transaction() as tx:
            # Moved first, so that the plans commit with it or not at all.
            if not self.move_checkpoint(tx, partition, cursor, page.next_cursor):
                return None
            # Streams are independent, so each is handled at once (one lock, one
            # check of which messages still stand), its messages in log order.
            for stream_id, messages in by_stream.items():
                self._publish_stream(tx, stream_id, messages, plans)
        return FollowedPage(len(page.events), page.next_cursor, appended=bool(by_stream))

    def _restricted(self, subjects: set[tuple[str, bytes]]) -> set[tuple[str, bytes]]:
        """Which of the page's subjects are restricted (Art. 18): their messages never
        reach the extractor (publishing checks again under each stream's lock)."""
        with self.store.reading() as view:
            return {s for s in subjects if subject_rights.is_restricted(view.connection, *s)}

    def _plan(self, event: RecordedEvent) -> IngestionPlan:
        """The extractor's plan for a message, validated; a rejected one becomes an
        empty plan that says why, so the message is not retried forever."""
        data = event.data or {}
        message = Message(
            text=data["content"], role=data["role"], speaker=data["ingest"].get("speaker")
        )
        try:
            return validate_plan(self.extractor.plan(message).body(), message)
        except (InvalidInputError, ValidationError) as e:
            log.warning("claim extractor output rejected for event %s: %s", event.event_id, e)
            return IngestionPlan(
                extractor=self.extractor.name,
                extractor_version=self.extractor.version,
                rules=(),
                failure=str(e),
            )

    def _publish_stream(
        self,
        tx: Transaction,
        stream_id: int,
        messages: list[RecordedEvent],
        plans: dict[uuid.UUID, IngestionPlan],
    ) -> None:
        """Publish each message's claims event, if the message still stands."""
        stream = tx.lock_stream(stream_id)
        # A restricted subject's messages are not extracted (Art. 18): no claims, no
        # automated retirement of their earlier claims.
        if stream is None or stream.closed_at is not None or tx.processing_restricted(stream):
            return  # forgotten since the page was read
        live = GraphReads(tx).live_memory_events(stream_id, [m.event_id for m in messages])
        for message in messages:
            if message.event_id in live:  # else erased since the page was read
                self._publish(tx, stream, message, plans[message.event_id])

    def _publish(
        self, tx: Transaction, stream: LockedStream, message: RecordedEvent, plan: IngestionPlan
    ) -> None:
        """One message's derivation: one event, appended alone and applied at once."""
        cipher = tx.locked_cipher(stream)
        data = claims_event(
            tx.connection,
            cipher,
            message,
            plan,
            len(self.graph.node_ids(message)),
            self.clock(),
        )
        new_event = NewEvent(ev.CLAIMS_EXTRACTED, data, event_id=ev.plan_event_id(message.event_id))
        version_before = stream.version
        [recorded] = tx.append_locked(stream, [new_event], ANY)
        if stream.version != version_before:  # not a replay of an earlier append
            self.graph.apply(tx.connection, cipher, recorded)
