"""Selective forgetting (Semvec mechanism 1): keep each subject's retrieval tier within capacity.

The retrieval tier of a subject is its ``capacity`` current nodes of highest
retention (:func:`projections.scoring.retention`: importance, confirmations,
age and how often retrieval returned them), Semvec's rule that selective
forgetting keeps the best-retained memories.  A pass of the job moves the
subject to that tier: current nodes outside it leave *default* retrieval
(archived), and archived nodes inside it come back (un-archived).  So an
archived memory returns once it is used enough to outrank the tier's
weakest: reinforced (its age restarts), retrieved with ``include_archived``
(its access count grows), or made the successor of a correction, which for
this decision keeps at least the retention of the node it retired (the fact
it now carries was in the tier); and it returns when the tier has room again
(the capacity grew, or tier nodes were superseded or erased).

Archiving is not erasure: an archived node is still readable (``get_node``,
assertion state, listings with ``include_archived``, retrieval with
``include_archived``), exported, and erased and certified like any other node
by ``delete_event`` and ``forget``.

Each move is an event appended to the subject's stream under its lock: one
``memory.unarchived`` and one ``memory.archived`` at most per pass (with
content-free ``retrieval.unarchived`` / ``retrieval.archived`` audit
entries), carrying the moved nodes' after-states and the retention each had:
replay applies the recorded decision and never decides again, so replay
equality holds however the scores move later.  A pass that finds the tier
as it should be appends nothing, so running the job twice moves nothing
twice.  ``capacity`` 0 turns the job off (and leaves archived nodes archived).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from eventstore import AuditEntry, EventStore, LockedStream, NewEvent, Transaction
from projections import events as ev
from projections import scoring
from projections.graph import NodeGraphProjection, state_to_json
from projections.model import EdgeKind, LifecycleState
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
    """What one pass did: subjects whose tier it changed, nodes archived and un-archived."""

    subjects: int
    nodes: int
    restored: int = 0

    def __bool__(self) -> bool:  # the scheduler logs passes that changed something
        return self.nodes > 0 or self.restored > 0


@dataclass(frozen=True)
class Archiver:
    """Finds subjects over the retrieval tier's capacity and archives their excess."""

    store: EventStore
    graph: NodeGraphProjection
    config: ScoringConfig
    capacity: int
    clock: Callable[[], datetime]

    def run(self, stream_ids: Collection[int] | None = None) -> ArchiveReport:
        """One pass over every subject whose tier may change (or over ``stream_ids`` only)."""
        if self.capacity <= 0:
            return ArchiveReport(0, 0)
        with self.store.reading() as view:
            candidates = GraphStore(view.connection).streams_for_tier(self.capacity)
        wanted = [s for s in candidates if stream_ids is None or s in stream_ids]
        moves = [self.archive_stream(stream_id) for stream_id in wanted]
        report = ArchiveReport(
            sum(1 for archived, restored in moves if archived or restored),
            sum(archived for archived, _ in moves),
            sum(restored for _, restored in moves),
        )
        if report:
            log.info(
                "archived %d and un-archived %d nodes of %d subjects",
                report.nodes,
                report.restored,
                report.subjects,
            )
        return report

    def archive_stream(self, stream_id: int) -> tuple[int, int]:
        """Move the stream to its tier: how many nodes archived and un-archived."""
        with self.store.transaction() as tx:
            stream = tx.lock_stream(stream_id)
            if stream is None or stream.closed_at is not None:
                return 0, 0
            # Read under the lock: what a concurrent pass moved is seen here.
            every = GraphStore(tx.connection).stream_nodes(stream_id)
            rows = [r for r in every if LifecycleState(r.lifecycle) in CURRENT_LIFECYCLES]
            in_tier = sum(1 for r in rows if r.archived_at is None)
            if in_tier <= self.capacity and in_tier == len(rows):
                return 0, 0  # within capacity, nothing archived: no scores needed
            now = self.clock()
            values = self._tier_retention(tx, stream_id, every, rows, now)
            restore, archive = _moves(rows, values, self.capacity)
            for kind, chosen, archived_at in (
                (ev.UNARCHIVED, restore, None),
                (ev.ARCHIVED, archive, now),
            ):
                if chosen:
                    data = _decision(rows, chosen, values, now, archived_at, self.capacity, in_tier)
                    self._record(tx, stream, kind, data, len(chosen))
            return len(archive), len(restore)

    def _record(
        self, tx: Transaction, stream: LockedStream, kind: str, data: dict[str, Any], nodes: int
    ) -> None:
        """Append one decision to the locked stream, apply it, and audit it (content-free)."""
        [recorded] = tx.append_locked(stream, [NewEvent(kind, data)])
        self.graph.apply(tx.connection, tx.locked_cipher(stream), recorded)
        tx.append_audit(
            AuditEntry(
                _AUDIT_ACTIONS[kind],
                namespace=stream.ref.namespace,
                subject_ref=stream.ref.subject_key.hex(),
                object_refs={"event_id": str(recorded.event_id)},
                counts={"nodes": nodes, "capacity": self.capacity},
            )
        )

    def _tier_retention(
        self,
        tx: Transaction,
        stream_id: int,
        every: Sequence[NodeRow],
        rows: Sequence[NodeRow],
        now: datetime,
    ) -> scoring.Floats:
        """Each current row's retention for the tier: its own, or that of a node it
        superseded when higher (a correction carries the fact it retired)."""
        values = self._retention(tx, stream_id, every, now)
        own = {row.node_id: float(v) for row, v in zip(every, values, strict=True)}
        carried = dict(own)
        for edge in GraphStore(tx.connection).stream_edges(stream_id):
            if edge.kind == EdgeKind.SUPERSEDES and edge.target_node in own:
                successor = edge.source_node
                if successor in carried:
                    carried[successor] = max(carried[successor], own[edge.target_node])
        return np.array([carried[row.node_id] for row in rows], dtype=np.float64)

    def _retention(
        self, tx: Transaction, stream_id: int, rows: Sequence[NodeRow], now: datetime
    ) -> scoring.Floats:
        """Each row's retention now, by the formula retrieval's recency term uses."""
        counts = AccessStore(tx.connection).counts(stream_id)
        touched = [row.last_reinforced_at or row.occurred_at for row in rows]
        age_days = np.array([(now - t).total_seconds() / 86_400 for t in touched])
        stretch = np.array(
            [scoring.retention_stretch(r.salience_base, r.reinforcement_count) for r in rows]
        )
        accesses = np.array([counts.get(row.node_id, 0) for row in rows], dtype=np.float64)
        return scoring.retention(self.config, age_days, stretch, accesses)


_AUDIT_ACTIONS = {ev.ARCHIVED: "retrieval.archived", ev.UNARCHIVED: "retrieval.unarchived"}


def _moves(
    rows: Sequence[NodeRow], values: scoring.Floats, capacity: int
) -> tuple[list[int], list[int]]:
    """Which rows to un-archive and which to archive so that the tier is the
    ``capacity`` rows of highest retention (ties: the larger node id stays)."""
    order = sorted(range(len(rows)), key=lambda i: (values[i], str(rows[i].node_id)))
    cut = max(0, len(rows) - capacity)
    restore = [i for i in order[cut:] if rows[i].archived_at is not None]
    archive = [i for i in order[:cut] if rows[i].archived_at is None]
    return restore, archive


def _decision(
    rows: Sequence[NodeRow],
    chosen: Sequence[int],
    values: scoring.Floats,
    now: datetime,
    archived_at: datetime | None,
    capacity: int,
    tier_size: int,
) -> dict[str, Any]:
    """A memory.archived or memory.unarchived payload: the after-states, and the
    scores that decided."""
    after = {}
    for i in chosen:
        state = {c: rows[i]._mapping[c] for c in STATE_COLUMNS}
        after[str(rows[i].node_id)] = state_to_json(
            state | {"archived_at": archived_at, "updated_at": now}
        )
    return {
        "reason": CAPACITY_REASON,
        "capacity": capacity,
        "tier_size": tier_size,
        "retention": {str(rows[i].node_id): float(values[i]) for i in chosen},
        "after": after,
    }
