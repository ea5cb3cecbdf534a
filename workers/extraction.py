"""The extraction worker: turns ingested messages into claims, with its own checkpoint.

It follows the log partition by partition like the projection runner, but it
writes to the log: per ingested message, one claims event in the owner's
stream (the saved plan, its claims, any retirements: the message's whole
derivation in one atomic record), projected inline by the node graph like
every other memory event.  The events of one stream's messages in a page are
appended in one call, which is atomic as well, so no message's set is ever
split; later messages of the batch see the claims of earlier ones before
those are applied (``publication.Unapplied``).  The append uses "any" as its
expected version, because callers keep appending to the same streams; the
stream lock it holds is what keeps its reads of earlier claims valid until
it appends.

Extraction itself (a rule set, or a call to a chat endpoint) runs before the
transaction, so a slow extractor holds no lock.  The transaction then claims
the partition's checkpoint and only proceeds if the checkpoint is still
where the page was read from; otherwise another worker got there first and
this batch is dropped, unwritten.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime

from pydantic import ValidationError

from eventstore import ANY, EventStore, LogCursor, NewEvent, RecordedEvent, Transaction
from eventstore.errors import InvalidInputError
from eventstore.ids import SYSTEM_NAMESPACE
from eventstore.store import utc_now
from projections import events as ev
from projections.claims.plan import ClaimExtractor, IngestionPlan, Message, validate_plan
from projections.claims.publication import Unapplied, claims_event
from projections.graph import NodeGraphProjection
from projections.storage import checkpoints
from projections.storage.graph_store import GraphStore

log = logging.getLogger(__name__)

NAME = "claims_extraction"
DEFAULT_BATCH_SIZE = 200
IDLE_SLEEP_SECONDS = 0.01


def is_ingested(event: RecordedEvent) -> bool:
    """A live message stored by ``ingest()`` (``store()`` never yields claims)."""
    return (
        event.type == ev.STORED
        and event.data is not None
        and "ingest" in event.data
        and event.stream.namespace != SYSTEM_NAMESPACE
    )


class ExtractionWorker:
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
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.store = store
        self.graph = graph
        self.extractor = extractor
        self.partitions = partitions
        self.batch_size = batch_size
        self.clock = clock
        with store.transaction() as tx:
            checkpoints.ensure_checkpoints(tx, NAME, partitions, clock())

    def partition_of(self, stream_id: int) -> int:
        return stream_id % self.partitions

    def checkpoint(self, partition: int) -> LogCursor:
        with self.store.reading() as view:
            return checkpoints.read(view.connection, NAME, partition)

    def run_once(self, partition: int) -> int | None:
        """Extract one page of a partition; ``None`` when another worker moved it first."""
        cursor = self.checkpoint(partition)
        page = self.store.read_all(cursor, self.batch_size, partition=(partition, self.partitions))
        if not page.events:
            return 0
        plans = {e.event_id: self._plan(e) for e in page.events if is_ingested(e)}
        by_stream: dict[int, list[RecordedEvent]] = {}
        for event in page.events:
            if event.event_id in plans:
                by_stream.setdefault(event.stream.stream_id, []).append(event)
        with self.store.transaction() as tx:
            if checkpoints.claim(tx.connection, NAME, partition) != cursor:
                return None
            # Streams are independent, so each is handled at once (one lock, one
            # check of which messages still stand), its messages in log order.
            for stream_id, messages in by_stream.items():
                self._publish_stream(tx, stream_id, messages, plans)
            checkpoints.advance(tx.connection, NAME, partition, page.next_cursor, self.clock())
        return len(page.events)

    def run_pending(self) -> int:
        """Extract everything visible now in every partition; the events read."""
        total = 0
        for partition in range(self.partitions):
            while applied := self.run_once(partition):
                total += applied
        return total

    def catch_up(self, cursor: LogCursor, stream_id: int, timeout: float) -> bool:
        """Wait (helping along) until the stream's partition has passed ``cursor``."""
        partition = self.partition_of(stream_id)
        deadline = time.monotonic() + timeout
        while self.checkpoint(partition) < cursor:
            if time.monotonic() > deadline:
                return False
            if not self.run_once(partition):
                time.sleep(IDLE_SLEEP_SECONDS)
        return True

    def run_forever(self, stop: threading.Event, poll_interval: float = 0.2) -> None:
        while not stop.is_set():
            if not self.run_pending():
                stop.wait(poll_interval)

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
        """Append and project each message's claims event, if the message still stands."""
        stream = tx.lock_stream_id(stream_id)
        if stream is None or stream.closed_at is not None:
            return  # forgotten since the page was read
        live = GraphStore(tx.connection).live_memory_events(
            stream_id, [m.event_id for m in messages]
        )
        cipher = tx.locked_cipher(stream)
        # One append for the stream's messages of this page: each message's plan,
        # claims and retirements are one event, and the append is atomic, so
        # every message's set lands whole (and the page's sets with each other).
        unapplied = Unapplied()
        new_events = [
            NewEvent(
                ev.CLAIMS_EXTRACTED,
                claims_event(
                    tx.connection,
                    cipher,
                    message,
                    plans[message.event_id],
                    len(self.graph.node_ids(message)),
                    self.clock(),
                    unapplied,
                ),
                event_id=ev.plan_event_id(message.event_id),
            )
            for message in messages
            if message.event_id in live  # else erased since the page was read
        ]
        if not new_events:
            return
        version_before = stream.version
        recorded = tx.append_locked(stream, new_events, ANY)
        if stream.version != version_before:  # not a replay of an earlier append
            for event in recorded:
                self.graph.apply(tx.connection, cipher, event)
