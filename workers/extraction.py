"""The extraction worker: turns ingested messages into claims, with its own checkpoint.

It follows the log partition by partition like the projection runner, but it
writes to the log: per ingested message, one atomic append to the owner's
stream of the claims event (the saved plan, its claims, any retirements),
projected inline by the node graph like every other memory event.  That
append uses "any" as its expected version, because callers keep appending
to the same streams; the stream lock it holds is what keeps its reads of
earlier claims valid until it appends.

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
from collections.abc import Callable
from datetime import datetime

from eventstore import ANY, EventStore, LogCursor, NewEvent, RecordedEvent, Transaction
from eventstore.errors import InvalidInputError
from eventstore.ids import SYSTEM_NAMESPACE
from eventstore.store import utc_now
from projections import events as ev
from projections.claims.plan import ClaimExtractor, IngestionPlan, Message, validate_plan
from projections.claims.publication import claims_event
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
            checkpoints.ensure_checkpoints(tx.connection, store.backend, NAME, partitions, clock())

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
        with self.store.transaction() as tx:
            if checkpoints.claim(tx.connection, NAME, partition) != cursor:
                return None
            for event in page.events:
                plan = plans.get(event.event_id)
                if plan is not None:
                    self._publish(tx, event, plan)
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
        except InvalidInputError as e:
            log.warning("claim extractor output rejected for event %s: %s", event.event_id, e)
            return IngestionPlan(
                extractor=self.extractor.name,
                extractor_version=self.extractor.version,
                rules=(),
                failure=str(e),
            )

    def _publish(self, tx: Transaction, message: RecordedEvent, plan: IngestionPlan) -> None:
        """Append and project the message's claims event, if the message still stands."""
        stream = tx.lock_stream_id(message.stream.stream_id)
        if stream is None or stream.closed_at is not None:
            return  # forgotten since the page was read
        if GraphStore(tx.connection).memory_event(stream.ref.stream_id, message.event_id) is None:
            return  # erased since the page was read
        cipher = tx.locked_cipher(stream)
        first_ordinal = len(self.graph.node_ids(message))
        data = claims_event(tx.connection, cipher, message, plan, first_ordinal, self.clock())
        new = NewEvent(ev.CLAIMS_EXTRACTED, data, event_id=ev.plan_event_id(message.event_id))
        version_before = stream.version
        [recorded] = tx.append_locked(stream, [new], ANY)
        if stream.version != version_before:  # not a replay of an earlier append
            self.graph.apply(tx.connection, cipher, recorded)
