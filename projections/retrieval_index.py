"""The retrieval index: one subject's decrypted nodes and vectors, in process memory.

Reading and decrypting every node and vector of a subject for every query
costs seconds at 100,000 nodes.  The index does it once per subject state: a
:class:`SubjectIndex` holds the decrypted nodes, their vectors as a float32
matrix, and every per-node score term that does not depend on the query
(salience, confidence, trigger boost, attractor penalty …).  A query is then
one matrix-vector product plus a few array operations.

Entries are validated on every query against the subject's
:class:`~projections.storage.vector_reads.StateToken`; any change to what
retrieval may return (new events, erasures, rebuilds, vector catch-up,
forget) changes the token and the whole subject is loaded again.  The cache
is a least-recently-used map bounded by the total number of cached nodes.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import threading
from collections import OrderedDict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.engine import Connection

from eventstore import SubjectCipher
from projections.model import (
    REINFORCEMENT_CAP,
    LifecycleState,
    Node,
    ScoreComponents,
    ScoredNode,
)
from projections.scoring import (
    AttractorProbe,
    ScoringConfig,
    TriggerProbe,
    source_confidence,
)
from projections.storage.graph_store import node_from_row
from projections.storage.vector_reads import StateToken
from projections.storage.vector_store import VectorStore

Floats = npt.NDArray[np.float64]

#: Default bound of the cache, in nodes: about 2.5 KB each at 384 dimensions, so 250 MB.
DEFAULT_MAX_CACHED_NODES = 100_000
#: Extra candidates re-scored exactly beyond ``limit``: the float32 pre-ranking can
#: misorder scores that differ by about 1e-6, never by more.
RESCORE_PAD = 32
TIE_MARGIN = 1e-5
#: Rows per block when scoring triggers and attractors against every node in float64.
BLOCK_ROWS = 8192
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


@dataclass(frozen=True)
class NodeFilter:
    """Which nodes a query considers: enum values as strings, ``None`` for any."""

    include_superseded: bool = False
    scopes: Collection[str] | None = None
    node_types: Collection[str] | None = None
    excluded_node_types: Collection[str] = ()
    source_types: Collection[str] | None = None


class SubjectIndex:
    """One subject's nodes and query-independent score terms (immutable once built)."""

    def __init__(
        self,
        nodes: Sequence[Node],
        vectors: npt.NDArray[np.float32],
        trigger_boost: Floats,
        attractor_penalty: Floats,
    ) -> None:
        self.nodes = list(nodes)
        self.vectors = vectors
        self.trigger_boost = trigger_boost
        self.attractor_penalty = attractor_penalty
        self.superseded = np.array(
            [n.lifecycle == LifecycleState.SUPERSEDED for n in nodes], dtype=bool
        )
        self.scope = np.array([n.scope.value for n in nodes], dtype=object)
        self.node_type = np.array([n.node_type.value for n in nodes], dtype=object)
        self.source_type = np.array([n.source_type.value for n in nodes], dtype=object)
        self.salience = _floats(n.salience_base for n in nodes)
        self.reinforcement = _floats(n.reinforcement_boost / REINFORCEMENT_CAP for n in nodes)
        self.confidence = _floats(n.confidence_base for n in nodes)
        self.source_confidence = _floats(source_confidence(n) for n in nodes)
        self.last_touch_us = np.array(
            [_micros(n.last_reinforced_at or n.created_at) for n in nodes], dtype=np.int64
        )
        # Same expression as scoring.retention, per node, so both agree to the last bit.
        self.stretch = _floats(
            (1 + n.salience_base) * (1 + math.log1p(n.reinforcement_count)) for n in nodes
        )
        # Ties are broken by the node id's text, as the scalar path sorts them.
        self.id_rank = np.argsort(np.argsort(np.array([str(n.id) for n in nodes])))

    def __len__(self) -> int:
        return len(self.nodes)

    def admitted(self, wanted: NodeFilter) -> npt.NDArray[np.intp]:
        """Indexes of the nodes the filter lets through."""
        mask = np.ones(len(self), dtype=bool)
        if not wanted.include_superseded:
            mask &= ~self.superseded
        for column, values in (
            (self.scope, wanted.scopes),
            (self.node_type, wanted.node_types),
            (self.source_type, wanted.source_types),
        ):
            if values is not None:
                mask &= np.isin(column, list(values))
        if wanted.excluded_node_types:
            mask &= ~np.isin(self.node_type, list(wanted.excluded_node_types))
        return np.flatnonzero(mask)


def _floats(values: Any) -> Floats:
    return np.fromiter(values, dtype=np.float64)


# -- loading ----------------------------------------------------------------------------


def load_subject(
    conn: Connection, cipher: SubjectCipher, config: ScoringConfig, embedder: str | None = None
) -> SubjectIndex:
    """Read and decrypt one subject's embedded nodes, triggers and attractors; only the
    vectors of ``embedder`` (the state token's: vectors of two embedders never mix)."""
    store = VectorStore(conn)
    rows = store.node_vectors(cipher.stream_id, embedder)
    nodes = [node_from_row(cipher, row) for row in rows]
    # The vector_store packing: little-endian float32 (see pack_vector).
    raw = [
        np.frombuffer(cipher.open("vector", row.node_id.bytes, row.embedding), dtype="<f4")
        for row in rows
    ]
    vectors = np.stack(raw) if raw else np.zeros((0, 0), dtype=np.float32)
    triggers, attractors = stream_probes(store, cipher)
    return SubjectIndex(
        nodes,
        vectors.astype(np.float32, copy=False),
        trigger_boosts(config, nodes, vectors, triggers),
        attractor_penalties(config, vectors, attractors),
    )


def stream_probes(
    store: VectorStore, cipher: SubjectCipher
) -> tuple[list[TriggerProbe], list[AttractorProbe]]:
    """The subject's resonance triggers and negative attractors, decrypted."""
    triggers = [
        TriggerProbe(body.get("keyword"), body.get("vector"), row.weight, row.threshold)
        for row, body in store.stream_triggers(cipher)
    ]
    attractors = [
        AttractorProbe(body["vector"], row.severity)
        for row, body in store.stream_attractors(cipher)
    ]
    return triggers, attractors


def _cosines(vectors: npt.NDArray[np.float32], probe: Sequence[float]) -> Floats:
    """Cosine of every row with ``probe`` in float64, a block of rows at a time."""
    target = np.asarray(probe, dtype=np.float64)
    out = np.empty(len(vectors), dtype=np.float64)
    for start in range(0, len(vectors), BLOCK_ROWS):
        block = vectors[start : start + BLOCK_ROWS].astype(np.float64)
        out[start : start + BLOCK_ROWS] = block @ target
    return out


def trigger_boosts(
    config: ScoringConfig,
    nodes: Sequence[Node],
    vectors: npt.NDArray[np.float32],
    triggers: Sequence[TriggerProbe],
) -> Floats:
    """γ · max over triggers of (strength · weight), per node (see scoring.trigger_boost)."""
    if not triggers or not nodes:
        return np.zeros(len(nodes), dtype=np.float64)
    texts = [n.content.casefold() for n in nodes]
    strengths = []
    for trigger in triggers:
        if trigger.keyword is not None:
            keyword = trigger.keyword.casefold()
            strength = _floats(1.0 if keyword in text else 0.0 for text in texts)
        elif trigger.vector is None:
            strength = np.zeros(len(nodes), dtype=np.float64)
        else:
            cos = _cosines(vectors, trigger.vector)
            strength = np.where(cos >= trigger.threshold, cos, 0.0)
        strengths.append(strength * trigger.weight)
    best: Floats = np.max(np.stack(strengths), axis=0)
    return config.trigger_retrieval_boost * best


def attractor_penalties(
    config: ScoringConfig, vectors: npt.NDArray[np.float32], attractors: Sequence[AttractorProbe]
) -> Floats:
    """min(δ · max over near attractors of (severity · cosine), 1) per node."""
    if not attractors or len(vectors) == 0:
        return np.zeros(len(vectors), dtype=np.float64)
    strengths = []
    for attractor in attractors:
        cos = _cosines(vectors, attractor.vector)
        near = cos >= config.negative_attractor_threshold
        strengths.append(np.where(near, attractor.severity * cos, -np.inf))
    best = np.max(np.stack(strengths), axis=0)
    best = np.where(np.isneginf(best), 0.0, best)
    penalty: Floats = np.minimum(config.negative_attractor_penalty * best, 1.0)
    return penalty


# -- scoring ------------------------------------------------------------------------------


def rank(
    index: SubjectIndex,
    query: Sequence[float],
    config: ScoringConfig,
    now: datetime,
    wanted: NodeFilter,
    limit: int,
) -> list[ScoredNode]:
    """The ``limit`` best admitted nodes, best first, ties by node id text.

    All nodes are pre-ranked with a float32 product; the best few (plus a
    margin for float32 rounding) are then scored again in float64, exactly as
    :func:`projections.scoring.score` would, and only they become objects.
    """
    admitted = index.admitted(wanted)
    if len(admitted) == 0:
        return []
    query64 = np.asarray(query, dtype=np.float64)
    # Over every row (selecting rows first would copy the matrix), with einsum's
    # own single-threaded loop: on a busy machine BLAS's threads cost more in
    # wake-ups than they save on a matrix-vector product.
    rough = np.einsum("ij,j->i", index.vectors, query64.astype(np.float32))[admitted]
    approximate = _totals(index, admitted, rough.astype(np.float64), config, now)
    candidates = admitted[_best(index, admitted, approximate, limit + RESCORE_PAD)]
    similarity = index.vectors[candidates].astype(np.float64) @ query64
    totals = _totals(index, candidates, similarity, config, now)
    order = np.lexsort((index.id_rank[candidates], -totals))[:limit]
    now_us = _micros(now)
    return [
        _scored(index, int(candidates[i]), float(similarity[i]), float(totals[i]), config, now_us)
        for i in order
    ]


def _best(
    index: SubjectIndex, admitted: npt.NDArray[np.intp], totals: Floats, count: int
) -> npt.NDArray[np.intp]:
    """Positions (into ``admitted``) of the ``count`` best totals, ties by id text."""
    if len(totals) > count:
        kth = np.partition(totals, len(totals) - count)[len(totals) - count]
        near = np.flatnonzero(totals >= kth - TIE_MARGIN)
    else:
        near = np.arange(len(totals))
    order = np.lexsort((index.id_rank[admitted[near]], -totals[near]))
    best: npt.NDArray[np.intp] = near[order[:count]]
    return best


def _retention(
    index: SubjectIndex, rows: npt.NDArray[np.intp], now_us: int, half_life: float
) -> Floats:
    age_days = np.maximum((now_us - index.last_touch_us[rows]) / 1e6, 0.0) / 86_400
    result: Floats = np.exp(-math.log(2) * age_days / (half_life * index.stretch[rows]))
    return result


def _totals(
    index: SubjectIndex,
    rows: npt.NDArray[np.intp],
    cosine: Floats,
    config: ScoringConfig,
    now: datetime,
) -> Floats:
    """The score formula of :func:`projections.scoring.score`, in the same order of operations."""
    relevance = (
        config.similarity_weight * np.maximum(cosine, 0.0)
        + config.recency_weight
        * _retention(index, rows, _micros(now), config.recency_half_life_days)
        + config.salience_weight * index.salience[rows]
        + config.reinforcement_weight * index.reinforcement[rows]
        + config.confidence_weight * index.confidence[rows] * index.source_confidence[rows]
    )
    total: Floats = (
        relevance * (1 + index.trigger_boost[rows]) * (1 - index.attractor_penalty[rows])
    )
    return total


def _scored(
    index: SubjectIndex, row: int, cosine: float, total: float, config: ScoringConfig, now_us: int
) -> ScoredNode:
    rows = np.array([row])
    components = ScoreComponents(
        similarity=max(cosine, 0.0),
        recency=float(_retention(index, rows, now_us, config.recency_half_life_days)[0]),
        salience=float(index.salience[row]),
        reinforcement=float(index.reinforcement[row]),
        confidence=float(index.confidence[row]),
        source_confidence=float(index.source_confidence[row]),
        trigger_boost=float(index.trigger_boost[row]),
        attractor_penalty=float(index.attractor_penalty[row]),
    )
    # A copy: callers may change the meta dict, the cached node must not change.
    node = index.nodes[row]
    return ScoredNode(dataclasses.replace(node, meta=copy.deepcopy(node.meta)), total, components)


# -- the cache ------------------------------------------------------------------------------


class RetrievalCache:
    """Least-recently-used subject indexes, bounded by their total number of nodes.

    Thread-safe: the engine may retrieve from several threads.  A subject is
    loaded outside the lock; two threads loading the same subject at once
    both succeed and the later one stays.
    """

    def __init__(self, max_nodes: int = DEFAULT_MAX_CACHED_NODES) -> None:
        self.max_nodes = max_nodes
        self._entries: OrderedDict[str, tuple[StateToken, SubjectIndex]] = OrderedDict()
        self._nodes = 0
        self._lock = threading.Lock()

    def get(self, subject: str, token: StateToken) -> SubjectIndex | None:
        """The cached index if it was loaded under exactly ``token``; else drops it."""
        with self._lock:
            entry = self._entries.get(subject)
            if entry is None:
                return None
            if entry[0] != token:
                self._remove(subject)
                return None
            self._entries.move_to_end(subject)
            return entry[1]

    def put(self, subject: str, token: StateToken, index: SubjectIndex) -> None:
        """Keep ``index``, evicting the least recently used until it fits."""
        if len(index) > self.max_nodes:
            return  # larger than the whole budget: scored once, never kept
        with self._lock:
            self._remove(subject)
            while self._entries and self._nodes + len(index) > self.max_nodes:
                self._remove(next(iter(self._entries)))
            self._entries[subject] = (token, index)
            self._nodes += len(index)

    def drop(self, subject: str) -> None:
        with self._lock:
            self._remove(subject)

    @property
    def cached_nodes(self) -> int:
        return self._nodes

    @property
    def subjects(self) -> list[str]:
        """Cached subjects, least recently used first."""
        with self._lock:
            return list(self._entries)

    def _remove(self, subject: str) -> None:
        entry = self._entries.pop(subject, None)
        if entry is not None:
            self._nodes -= len(entry[1])
