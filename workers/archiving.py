"""Selective forgetting (Semvec mechanism 1): keep each subject's retrieval tier within capacity.

When a subject has more current nodes than ``capacity``, the ones with the
lowest retention (:func:`projections.scoring.retention`: importance,
confirmations, age and how often retrieval returned them) leave *default*
retrieval.  That is archiving, not erasure: an archived node is still
readable (``get_node``, assertion state, listings with ``include_archived``,
retrieval with ``include_archived``), exported, and erased and certified
like any other node by ``delete_event`` and ``forget``.

Each decision is one ``memory.archived`` event appended to the subject's
stream under its lock (with a content-free ``retrieval.archived`` audit
entry), carrying the archived nodes' after-states and the retention each
had: replay applies the recorded decision and never decides again, so
replay equality holds however the scores move later.  A pass over a subject
already within capacity appends nothing, so running the job twice archives
nothing twice.  ``capacity`` 0 turns the job off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from eventstore import AuditEntry, EventStore, NewEvent, Transaction
from projections import events as ev
from projections import scoring
from projections.graph import NodeGraphProjection, state_to_json
from projections.scoring import ScoringConfig
from projections.storage.access_store import AccessStore
from projections.storage.graph_store import (
    CURRENT_LIFECYCLES,
    STATE_COLUMNS,
    GraphStore,
    NodeRow,
)

log = logging.getLogger(__name__)

#: The reason every archiving decision records (the only one so far).
CAPACITY_REASON = "capacity"


@dataclass(frozen=True)
class ArchiveReport:
    """What one pass did: subjects that were over capacity and nodes archived."""

    subjects: int
    nodes: int

    def __bool__(self) -> bool:  # the scheduler logs passes that changed something
        return self.nodes > 0


class Archiver:
    """Finds subjects over the retrieval tier's capacity and archives their excess."""

    def __init__(
        self,
        store: EventStore,
        graph: NodeGraphProjection,
        config: ScoringConfig,
        capacity: int,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.graph = graph
        self.config = config
        self.capacity = capacity
        self.clock = clock

    def run(self, stream_ids: Collection[int] | None = None) -> ArchiveReport:
        """One pass over every subject over capacity (or over ``stream_ids`` only)."""
        if self.capacity <= 0:
            return ArchiveReport(0, 0)
        with self.store.reading() as view:
            over = GraphStore(view.connection).streams_over_capacity(self.capacity)
        wanted = [s for s in over if stream_ids is None or s in stream_ids]
        archived = [self.archive_stream(stream_id) for stream_id in wanted]
        report = ArchiveReport(sum(1 for a in archived if a), sum(archived))
        if report.nodes:
            log.info("archived %d nodes of %d subjects", report.nodes, report.subjects)
        return report

    def archive_stream(self, stream_id: int) -> int:
        """Archive the stream's lowest-retention nodes beyond capacity; how many."""
        with self.store.transaction() as tx:
            stream = tx.lock_stream_id(stream_id)
            if stream is None or stream.closed_at is not None:
                return 0
            # Read under the lock: what a concurrent pass archived is seen here.
            rows = GraphStore(tx.connection).stream_nodes(
                stream_id, lifecycles=CURRENT_LIFECYCLES, include_archived=False
            )
            excess = len(rows) - self.capacity
            if excess <= 0:
                return 0
            now = self.clock()
            values = self._retention(tx, stream_id, rows, now)
            chosen = sorted(range(len(rows)), key=lambda i: (values[i], str(rows[i].node_id)))
            data = _decision(rows, [int(i) for i in chosen[:excess]], values, now, self.capacity)
            [recorded] = tx.append_locked(stream, [NewEvent(ev.ARCHIVED, data)])
            self.graph.apply(tx.connection, tx.locked_cipher(stream), recorded)
            tx.append_audit(
                AuditEntry(
                    "retrieval.archived",
                    subject_ref=stream.ref.subject_key.hex(),
                    object_refs={"event_id": str(recorded.event_id)},
                    counts={"nodes": excess, "capacity": self.capacity},
                )
            )
            return excess

    def _retention(
        self, tx: Transaction, stream_id: int, rows: Sequence[NodeRow], now: datetime
    ) -> scoring.Floats:
        """Each row's retention now, by the formula retrieval's recency term uses."""
        counts = AccessStore(tx.connection).counts(stream_id)
        touched = [row.last_reinforced_at or row.created_at for row in rows]
        age_days = np.array([(now - t).total_seconds() / 86_400 for t in touched])
        stretch = np.array(
            [scoring.retention_stretch(r.salience_base, r.reinforcement_count) for r in rows]
        )
        accesses = np.array([counts.get(row.node_id, 0) for row in rows], dtype=np.float64)
        return scoring.retention(self.config, age_days, stretch, accesses)


def _decision(
    rows: Sequence[NodeRow],
    chosen: Sequence[int],
    values: scoring.Floats,
    now: datetime,
    capacity: int,
) -> dict[str, Any]:
    """The memory.archived payload: the after-states, and the scores that decided."""
    after = {}
    for i in chosen:
        state = {c: rows[i]._mapping[c] for c in STATE_COLUMNS}
        after[str(rows[i].node_id)] = state_to_json(state | {"archived_at": now, "updated_at": now})
    return {
        "reason": CAPACITY_REASON,
        "capacity": capacity,
        "tier_size": len(rows),
        "retention": {str(rows[i].node_id): float(values[i]) for i in chosen},
        "after": after,
    }
