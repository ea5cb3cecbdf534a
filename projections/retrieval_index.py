"""The retrieval index: one subject's decrypted nodes, vectors and terms, in process memory.

Reading and decrypting every node and vector of a subject for every query
costs seconds at 100,000 nodes.  The index does it once per subject state: a
:class:`SubjectIndex` holds the decrypted nodes, their vectors as a float32
matrix, the lexical (BM25) postings of their text, and every per-node input
of the score that does not depend on the query (salience, confidence, trigger
boost, attractor penalty …).  A query is then one matrix-vector product, one
pass over the postings of its terms, and a few array operations; the score
itself is computed by :mod:`projections.scoring`, the only implementation.

Entries are validated on every query against the subject's
:class:`~projections.storage.vector_reads.StateToken`; any change to what
retrieval may return (new events, erasures, rebuilds, vector catch-up,
forget) changes the token.  When only new events of the same stream changed
it, :func:`refresh` applies those events to the cached index in time that
grows with the events, not with the subject: new nodes and their vectors are
appended, nodes named in the events' after-states are read again, and trigger
or attractor changes recompute those two terms.  Anything else (erasures,
rebuilds, a forget, an index loaded before the vectors caught up) loads the
subject again.  The cache is a least-recently-used map bounded by the total
number of cached nodes.
Plaintext (node text, its terms) stays in this process's memory; on disk the
index exists only as an image sealed under the subject's key
(:mod:`projections.index_image`), which a cold process loads instead of the rows.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
import uuid
from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy.engine import Connection

from eventstore import RecordedEvent, SubjectCipher
from projections import events as ev
from projections import scoring
from projections.dates import named_period
from projections.lexical import LexicalIndex
from projections.model import (
    REINFORCEMENT_CAP,
    EdgeKind,
    LifecycleState,
    Node,
    NodeType,
    Scope,
    ScoreComponents,
    ScoredNode,
    SourceType,
)
from projections.scoring import AttractorProbe, ScoringConfig, TriggerProbe
from projections.storage import graph_queries
from projections.storage.graph_store import GraphStore, node_from_row
from projections.storage.item_store import ItemStore
from projections.storage.vector_reads import StateToken
from projections.storage.vector_store import VectorStore

Floats = npt.NDArray[np.float64]
Rows = npt.NDArray[np.intp]

#: Default bound of the cache, in nodes: about 2.6 KB each with wordllama's 256
#: dimensions (measured), so about 520 MB.  Twice the largest subject the latency
#: targets name (100,000 nodes): a subject just past the bound would be loaded
#: again on every query, seconds each.
DEFAULT_MAX_CACHED_NODES = 200_000
#: Scores closer than this to the last place are ordered by node id text, like exact ties.
TIE_MARGIN = 1e-12
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SCOPES = {s.value: i for i, s in enumerate(Scope)}
_NODE_TYPES = {t.value: i for i, t in enumerate(NodeType)}
_SOURCE_TYPES = {s.value: i for i, s in enumerate(SourceType)}


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


#: A metadata value a filter can ask for: a JSON scalar.
MetaValue = str | int | float | bool | None


@dataclass(frozen=True)
class MetaPrefix:
    """A ``meta`` condition met by a string value that starts with ``text`` (what a
    path-like value such as a LangGraph namespace is searched by)."""

    text: str


#: What a ``meta`` filter asks of one key: an equal JSON scalar, or a string prefix.
MetaCondition = MetaValue | MetaPrefix
_FOREVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class NodeFilter:
    """Which nodes a query considers: enum values as strings, ``None`` for any.

    Every part is applied before ranking (a filtered query ranks only the nodes
    it admits).  ``as_of`` admits the nodes valid at that moment, on effective
    time: effective by then and not retired by then (archived or retired since
    alike); with ``include_superseded`` also those retired by then.
    ``occurred_since``/``occurred_until`` bound the effective time (half-open);
    ``meta`` keeps nodes whose metadata has every given key with an equal value
    (JSON equality: ``1`` equals ``1.0``, ``true`` equals neither) or, for a
    :class:`MetaPrefix`, a string value starting with its text; ``event_ids``
    keeps the nodes of those events (a caller's own selection, e.g. the items a
    LangGraph filter matched).
    """

    include_superseded: bool = False
    #: Archived nodes (out of the retrieval tier, see workers.archiving) only on request.
    include_archived: bool = False
    scopes: Collection[str] | None = None
    node_types: Collection[str] | None = None
    excluded_node_types: Collection[str] = ()
    source_types: Collection[str] | None = None
    as_of: datetime | None = None
    occurred_since: datetime | None = None
    occurred_until: datetime | None = None
    meta: Mapping[str, MetaCondition] | None = None
    event_ids: Collection[uuid.UUID] | None = None


class _Column:
    """A numpy array that grows by appending, with amortised doubling.

    Growing makes room for twice what is needed: a subject loaded in one block
    then takes as many stores again before its arrays are copied, instead of
    copying them all (tens of ms at 10,000 nodes) on the first store after the
    load.  ``np.zeros`` maps the room lazily, so it costs no memory until used.
    """

    def __init__(self, dtype: Any, width: int | None = None) -> None:
        self._shape_tail = () if width is None else (width,)
        self._data = np.zeros((16, *self._shape_tail), dtype=dtype)
        self._size = 0

    def extend(self, values: npt.ArrayLike) -> None:
        block = np.asarray(values, dtype=self._data.dtype).reshape(-1, *self._shape_tail)
        needed = self._size + len(block)
        if needed > len(self._data):
            grown = np.zeros((2 * needed, *self._shape_tail), self._data.dtype)
            grown[: self._size] = self._data[: self._size]
            self._data = grown
        self._data[self._size : needed] = block
        self._size = needed

    @property
    def values(self) -> Any:
        """The filled part (a view: writes to it change the column)."""
        return self._data[: self._size]


@dataclass(frozen=True)
class NodeColumns:
    """Each row's query-independent score inputs, one array row per node (see
    :class:`SubjectIndex`)."""

    #: superseded, scope, node type, source type, archived, asks a question
    codes: npt.NDArray[np.int8]
    #: salience, reinforcement, confidence, source confidence, retention stretch,
    #: trigger boost, attractor penalty
    numbers: Floats
    #: Where recency counts from, in µs.
    last_touch_us: npt.NDArray[np.int64]
    #: Effective time and end of validity (``_FOREVER`` while it holds), in µs.
    validity_us: npt.NDArray[np.int64]


@dataclass
class IndexParts:
    """Everything a :class:`SubjectIndex` holds but its access counts, as plain parts."""

    nodes: list[Node]
    vectors: npt.NDArray[np.float32]
    columns: NodeColumns
    lexical: LexicalIndex
    triggers: list[TriggerProbe]
    attractors: list[AttractorProbe]
    item_revisions: set[uuid.UUID]
    likely_updates: list[tuple[uuid.UUID, uuid.UUID]]
    version: int
    stream_id: int


class _RowsBy:
    """Rows by one metadata key's JSON scalars, and by source event: a ``meta`` filter
    is set intersections (a prefix condition a union over the key's distinct values),
    an ``event_ids`` filter a lookup.

    Each map is built from the rows so far when a filter first asks for it, then kept
    up to date by :meth:`add`: the first query filtering on one key reads that key of
    every node (about 1 ms at 10,000 nodes), not every key of every node (about 30 ms,
    the first filtered query's wait when one map held them all).
    """

    def __init__(self, nodes: Sequence[Node]) -> None:
        self._nodes = nodes
        self._meta: dict[str, dict[object, list[int]]] = {}
        self._event: dict[uuid.UUID, list[int]] | None = None

    def add(self, first: int, nodes: Sequence[Node]) -> None:
        """Index rows ``first`` on (``nodes``) in the maps built so far."""
        for key, values in self._meta.items():
            _index_key(values, key, nodes, first)
        if self._event is not None:
            _index_events(self._event, nodes, first)

    @property
    def event(self) -> dict[uuid.UUID, list[int]]:
        if self._event is None:
            self._event = {}
            _index_events(self._event, self._nodes, 0)
        return self._event

    def meeting(self, key: str, condition: MetaCondition) -> set[int]:
        """The rows whose metadata meets ``condition`` at ``key``."""
        values = self._meta.get(key)
        if values is None:
            values = self._meta[key] = {}
            _index_key(values, key, self._nodes, 0)
        if isinstance(condition, MetaPrefix):
            return {
                row
                for value, rows in values.items()
                if isinstance(value, str) and value.startswith(condition.text)
                for row in rows
            }
        return set(values.get(_scalar_key(condition), ()))


def _index_key(
    values: dict[object, list[int]], key: str, nodes: Sequence[Node], first: int
) -> None:
    for row, node in enumerate(nodes, start=first):
        if key in node.meta and (found := _scalar_key(node.meta[key])) is not _NOT_SCALAR:
            values.setdefault(found, []).append(row)


def _index_events(event: dict[uuid.UUID, list[int]], nodes: Sequence[Node], first: int) -> None:
    for row, node in enumerate(nodes, start=first):
        event.setdefault(node.event_id, []).append(row)


class SubjectIndex:
    """One subject's nodes and query-independent score inputs, grown by :meth:`add`.

    Rows are in store order (the order :meth:`add` received them); the
    session neighbours of a row are the rows of the same ``session_id``
    just before and after it.
    """

    def __init__(
        self,
        config: ScoringConfig,
        triggers: Sequence[TriggerProbe] = (),
        attractors: Sequence[AttractorProbe] = (),
    ) -> None:
        self.config = config
        self.triggers = list(triggers)
        self.attractors = list(attractors)
        self.nodes: list[Node] = []
        self.lexical = LexicalIndex()
        self._vectors: _Column | None = None  # its width is the first vector's
        # superseded, scope, node type, source type, archived, asks a question
        self._codes = _Column(np.int8, 6)
        self._numbers = _Column(np.float64, 7)
        #: How often retrieval returned each row (projections.access): it changes on
        #: reads, not events, so it is kept apart from the node's own numbers.
        self._accesses = _Column(np.float64)
        self._last_touch_us = _Column(np.int64)
        #: Effective time and end of validity (``_FOREVER`` while it holds), in µs.
        self._validity_us = _Column(np.int64, 2)
        #: Rows by metadata entry and by event, built by the first query that filters
        #: on either (loading a large subject need not pay for them), then kept up.
        self._rows_by: _RowsBy | None = None
        self._neighbours = _Column(np.intp, 2)
        self._session_tail: dict[str, int] = {}
        self._rows: dict[uuid.UUID, int] = {}
        #: What replaced what (scoring.follow_successors): each superseded row's
        #: successor, each ingested message's NOTE row and the rows of its claims.
        self._replaced_by: dict[int, uuid.UUID] = {}
        self._note_rows: dict[uuid.UUID, int] = {}
        self._claim_rows: dict[uuid.UUID, list[int]] = {}
        #: Events that store a revision of a keyed item (MemoryClient.put_item): a new
        #: value of the item replaces the old one; it takes nothing of its place.
        self._item_revisions: set[uuid.UUID] = set()
        #: Open likely updates (projections.updates): older node id -> newer node id.
        self._likely_updates: dict[uuid.UUID, uuid.UUID] = {}
        #: Held while ranking or changing: threads share cached indexes.
        self.lock = threading.Lock()
        #: The stream version the index includes every event up to (set by its loader).
        self.version = 0
        #: The subject's stream (set by its loader).
        self.stream_id = 0

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def vectors(self) -> npt.NDArray[np.float32]:
        if self._vectors is None:
            return np.zeros((0, 0), dtype=np.float32)
        values: npt.NDArray[np.float32] = self._vectors.values
        return values

    def add(self, nodes: Sequence[Node], vectors: npt.NDArray[np.float32]) -> None:
        """Append ``nodes`` (in store order) with their unit vectors, one row each."""
        if not nodes:
            return
        for node in nodes:
            self.lexical.add(node.content)
        texts = [n.content.casefold() for n in nodes]
        boosts = scoring.trigger_boosts(self.config, texts, vectors, self.triggers)
        penalties = scoring.attractor_penalties(self.config, vectors, self.attractors)
        columns = NodeColumns(
            codes=np.asarray([_codes(n) for n in nodes], dtype=np.int8).reshape(-1, 6),
            numbers=np.asarray(
                [[*_numbers(n), b, p] for n, b, p in zip(nodes, boosts, penalties, strict=True)],
                dtype=np.float64,
            ).reshape(-1, 7),
            last_touch_us=np.asarray([_last_touch(n) for n in nodes], dtype=np.int64),
            validity_us=np.asarray([_validity(n) for n in nodes], dtype=np.int64).reshape(-1, 2),
        )
        self._append(nodes, vectors, columns)

    @classmethod
    def restore(cls, parts: IndexParts, config: ScoringConfig) -> SubjectIndex:
        """An index as :meth:`parts` gave it (an image's, see projections.index_image):
        its terms and score inputs as they were, not computed again."""
        index = cls(config, parts.triggers, parts.attractors)
        index.lexical = parts.lexical
        index._append(parts.nodes, parts.vectors, parts.columns)
        index.mark_item_revisions(parts.item_revisions)
        index.set_likely_updates(parts.likely_updates)
        index.version, index.stream_id = parts.version, parts.stream_id
        return index

    def parts(self) -> IndexParts:
        """What :meth:`restore` rebuilds this index from (copies: the index may grow
        while they are encoded; access counts are left out, they are read at load)."""
        return IndexParts(
            nodes=list(self.nodes),
            vectors=self.vectors.copy(),
            columns=NodeColumns(
                codes=self._codes.values.copy(),
                numbers=self._numbers.values.copy(),
                last_touch_us=self._last_touch_us.values.copy(),
                validity_us=self._validity_us.values.copy(),
            ),
            lexical=self.lexical.copy(),
            triggers=list(self.triggers),
            attractors=list(self.attractors),
            item_revisions=set(self._item_revisions),
            likely_updates=list(self._likely_updates.items()),
            version=self.version,
            stream_id=self.stream_id,
        )

    def _append(
        self, nodes: Sequence[Node], vectors: npt.NDArray[np.float32], columns: NodeColumns
    ) -> None:
        """Append rows whose terms (in ``self.lexical`` already) and score inputs are given."""
        if not nodes:
            return
        first = len(self.nodes)
        self.nodes.extend(nodes)
        self._rows.update((n.id, row) for row, n in enumerate(nodes, start=first))
        if self._vectors is None:
            self._vectors = _Column(np.float32, vectors.shape[1])
        self._vectors.extend(vectors)
        self._codes.extend(columns.codes)
        self._numbers.extend(columns.numbers)
        self._last_touch_us.extend(columns.last_touch_us)
        self._validity_us.extend(columns.validity_us)
        if self._rows_by is not None:
            self._rows_by.add(first, nodes)
        self._accesses.extend(np.zeros(len(nodes)))
        self._neighbours.extend(np.full((len(nodes), 2), -1))
        neighbours = self._neighbours.values
        for row, node in enumerate(nodes, start=first):
            self._track_replacement(row, node)
            if node.node_type is NodeType.NOTE:
                self._note_rows.setdefault(node.event_id, row)
            elif "claim_predicate" in node.meta:
                self._claim_rows.setdefault(node.event_id, []).append(row)
            if node.session_id is None:
                continue
            before = self._session_tail.get(node.session_id)
            if before is not None:
                neighbours[row, 0] = before
                neighbours[before, 1] = row
            self._session_tail[node.session_id] = row

    @property
    def rows_by(self) -> _RowsBy:
        """Rows by metadata entry and by event (built on first use; call under ``lock``)."""
        if self._rows_by is None:
            self._rows_by = _RowsBy(self.nodes)
        return self._rows_by

    def _track_replacement(self, row: int, node: Node) -> None:
        if node.lifecycle == LifecycleState.SUPERSEDED and node.superseded_by is not None:
            self._replaced_by[row] = node.superseded_by
        else:
            self._replaced_by.pop(row, None)

    def successions(self) -> Rows:
        """(old row, successor row) pairs: each superseded node and the node that
        replaced it, and each ingested message's note whose every claim was replaced,
        with the replacement of its claims (the best-placed one is its successor)."""
        pairs = [
            (row, successor)
            for row, new in self._replaced_by.items()
            if (successor := self._rows.get(new)) is not None
            and self.nodes[successor].event_id not in self._item_revisions
        ]
        retired_events = {self.nodes[row].event_id for row, _ in pairs}
        for event_id in retired_events:
            note, claims = self._note_rows.get(event_id), self._claim_rows.get(event_id, [])
            if note is None or not claims or any(c not in self._replaced_by for c in claims):
                continue
            pairs += [(note, s) for c in claims if (s := self._rows.get(self._replaced_by[c]))]
        pairs += self._likely_successions(covered={row for row, _ in pairs})
        return np.asarray(pairs, dtype=np.intp).reshape(-1, 2)

    def _likely_successions(self, covered: set[int]) -> list[tuple[int, int]]:
        """(old row, successor row) pairs of the open likely updates: every row of the
        older memory's event (its note and its claims) is succeeded by the newer memory,
        except rows in ``covered``, whose successor a supersede or a bounded-rule
        retirement already names (that decision is firmer than a likely update)."""
        pairs: list[tuple[int, int]] = []
        for old_id, new_id in self._likely_updates.items():
            old, new = self._rows.get(old_id), self._rows.get(new_id)
            if old is None or new is None:  # not embedded yet, or gone
                continue
            event_id = self.nodes[old].event_id
            rows = {old, *self._claim_rows.get(event_id, ())}
            note = self._note_rows.get(event_id)
            rows = rows if note is None else rows | {note}
            pairs += [(row, new) for row in sorted(rows - covered)]
        return pairs

    def set_likely_updates(self, pairs: Iterable[tuple[uuid.UUID, uuid.UUID]]) -> None:
        """The subject's open likely updates, as (older node id, newer node id) pairs."""
        self._likely_updates = dict(pairs)

    def mark_item_revisions(self, event_ids: Iterable[uuid.UUID]) -> None:
        """These events store revisions of keyed items (see :meth:`successions`)."""
        self._item_revisions.update(event_ids)

    def row_of(self, node_id: uuid.UUID) -> int | None:
        return self._rows.get(node_id)

    def set_accesses(self, counts: Mapping[uuid.UUID, int]) -> None:
        """Each node's access count as read at load (nodes not named keep theirs)."""
        values = self._accesses.values
        for node_id, count in counts.items():
            row = self._rows.get(node_id)
            if row is not None:
                values[row] = count

    def count_accesses(self, node_ids: Collection[uuid.UUID]) -> None:
        """One more access of each node (retrieval returned them)."""
        with self.lock:
            values = self._accesses.values
            for node_id in node_ids:
                row = self._rows.get(node_id)
                if row is not None:
                    values[row] += 1

    def replace(self, row: int, node: Node) -> None:
        """A node's new state (lifecycle, reinforcement, confidence …); its text,
        vector and session never change, nor do the terms derived from them."""
        self.nodes[row] = node
        self._track_replacement(row, node)
        self._codes.values[row] = _codes(node)
        self._numbers.values[row, :5] = _numbers(node)
        self._last_touch_us.values[row] = _last_touch(node)
        self._validity_us.values[row] = _validity(node)

    def set_probes(
        self, triggers: Sequence[TriggerProbe], attractors: Sequence[AttractorProbe]
    ) -> None:
        """New triggers or attractors: their two terms are recomputed for every row."""
        self.triggers, self.attractors = list(triggers), list(attractors)
        texts = [n.content.casefold() for n in self.nodes]
        numbers = self._numbers.values
        numbers[:, 5] = scoring.trigger_boosts(self.config, texts, self.vectors, self.triggers)
        numbers[:, 6] = scoring.attractor_penalties(self.config, self.vectors, self.attractors)

    def admitted(self, wanted: NodeFilter) -> npt.NDArray[np.bool_]:
        """Which rows the filter lets through."""
        codes = self._codes.values
        mask = np.ones(len(self), dtype=bool)
        if wanted.as_of is not None:
            mask &= self._valid_at(_micros(wanted.as_of), wanted.include_superseded)
        else:
            if not wanted.include_superseded:
                mask &= codes[:, 0] == 0
            if not wanted.include_archived:
                mask &= codes[:, 4] == 0
        effective = self._validity_us.values[:, 0]
        if wanted.occurred_since is not None:
            mask &= effective >= _micros(wanted.occurred_since)
        if wanted.occurred_until is not None:
            mask &= effective < _micros(wanted.occurred_until)
        if wanted.meta is not None:
            mask &= self._meta_match(wanted.meta)
        if wanted.event_ids is not None:
            chosen = np.zeros(len(self), dtype=bool)
            by_event = self.rows_by.event
            chosen[[r for e in wanted.event_ids for r in by_event.get(e, ())]] = True
            mask &= chosen
        for column, table, values in (
            (1, _SCOPES, wanted.scopes),
            (2, _NODE_TYPES, wanted.node_types),
            (3, _SOURCE_TYPES, wanted.source_types),
        ):
            if values is not None:
                mask &= np.isin(codes[:, column], [table[v] for v in values])
        if wanted.excluded_node_types:
            excluded = [_NODE_TYPES[v] for v in wanted.excluded_node_types]
            mask &= ~np.isin(codes[:, 2], excluded)
        return mask

    def effective_within(self, start: datetime, end: datetime) -> npt.NDArray[np.bool_]:
        """Rows whose effective time lies in ``[start, end)``."""
        effective = self._validity_us.values[:, 0]
        within: npt.NDArray[np.bool_] = (effective >= _micros(start)) & (effective < _micros(end))
        return within

    def _valid_at(self, moment_us: int, retired_too: bool) -> npt.NDArray[np.bool_]:
        """Rows in effect at ``moment_us``: effective by then and (unless ``retired_too``)
        not retired by then.  Archiving is a tier, not validity: it admits nothing less."""
        validity = self._validity_us.values
        held: npt.NDArray[np.bool_] = validity[:, 0] <= moment_us
        if not retired_too:
            held &= moment_us < validity[:, 1]
        return held

    def _meta_match(self, wanted: Mapping[str, MetaCondition]) -> npt.NDArray[np.bool_]:
        mask = np.zeros(len(self), dtype=bool)
        rows: set[int] | None = None
        for key, condition in wanted.items():
            found = self.rows_by.meeting(key, condition)
            rows = found if rows is None else rows & found
            if not rows:
                return mask
        if rows is None:  # no keys asked: every row
            mask[:] = True
        else:
            mask[list(rows)] = True
        return mask

    def terms(self, now: datetime, matched: Floats) -> scoring.Terms:
        """Every row's score inputs, given each row's match."""
        numbers = self._numbers.values
        age_days = (_micros(now) - self._last_touch_us.values) / 1e6 / 86_400
        return scoring.Terms(
            match=matched,
            recency=scoring.retention(self.config, age_days, numbers[:, 4], self._accesses.values),
            salience=numbers[:, 0],
            reinforcement=numbers[:, 1],
            confidence=numbers[:, 2],
            source_confidence=numbers[:, 3],
            trigger_boost=numbers[:, 5],
            attractor_penalty=numbers[:, 6],
        )

    @property
    def accesses(self) -> Floats:
        values: Floats = self._accesses.values
        return values

    @property
    def asks(self) -> npt.NDArray[np.bool_]:
        """Which rows ask a question."""
        asks: npt.NDArray[np.bool_] = self._codes.values[:, 5] == 1
        return asks

    @property
    def neighbours(self) -> Rows:
        values: Rows = self._neighbours.values
        return values


def _last_touch(node: Node) -> int:
    """Where a node's recency counts from: its last confirmation, else its effective
    time (history stored today with an old ``occurred_at`` is not fresh)."""
    return _micros(node.last_reinforced_at or node.occurred_at)


def _validity(node: Node) -> list[int]:
    """Effective time and end of validity.  A node retired before effective time
    existed (no ``valid_to`` until its stream's graph is rebuilt, see migration
    pj0010) counts as never in effect, rather than as never retired."""
    if node.valid_to is not None:
        end = _micros(node.valid_to)
    elif node.lifecycle == LifecycleState.SUPERSEDED:
        end = _micros(node.occurred_at)
    else:
        end = _FOREVER
    return [_micros(node.occurred_at), end]


#: What :func:`_scalar_key` gives a value that is no JSON scalar (a list or an object).
_NOT_SCALAR = object()


def _scalar_key(value: object) -> object:
    """A JSON scalar keyed by JSON equality: numbers by value (1 == 1.0), booleans and
    null apart from them (``True == 1`` in Python); :data:`_NOT_SCALAR` for others."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", _number(value))
    if isinstance(value, str):
        return value
    return _NOT_SCALAR


def meta_matches(meta: Mapping[str, Any], wanted: Mapping[str, MetaCondition]) -> bool:
    """Whether ``meta`` meets every condition of ``wanted`` (the ``meta`` filter of
    :class:`NodeFilter`, for one node)."""
    for key, condition in wanted.items():
        if key not in meta:
            return False
        value = meta[key]
        if isinstance(condition, MetaPrefix):
            if not (isinstance(value, str) and value.startswith(condition.text)):
                return False
        elif (held := _scalar_key(value)) is _NOT_SCALAR or held != _scalar_key(condition):
            return False
    return True


def _number(value: float) -> float:
    """A number as JSON compares it; an integer beyond every float stays itself."""
    try:
        return float(value)
    except OverflowError:
        return value


def _codes(node: Node) -> list[int]:
    return [
        node.lifecycle == LifecycleState.SUPERSEDED,
        _SCOPES[node.scope.value],
        _NODE_TYPES[node.node_type.value],
        _SOURCE_TYPES[node.source_type.value],
        node.archived_at is not None,
        "?" in node.content,  # its session's next node is its reply (scoring.match)
    ]


def _numbers(node: Node) -> list[float]:
    """salience, reinforcement, confidence, source confidence, retention stretch."""
    return [
        node.salience_base,
        node.reinforcement_boost / REINFORCEMENT_CAP,
        node.confidence_base,
        scoring.source_confidence(node),
        scoring.retention_stretch(node.salience_base, node.reinforcement_count),
    ]


# -- loading ----------------------------------------------------------------------------


def load_subject(
    conn: Connection, cipher: SubjectCipher, config: ScoringConfig, embedder: str | None = None
) -> SubjectIndex:
    """Read and decrypt one subject's embedded nodes, triggers and attractors; only the
    vectors of ``embedder`` (the state token's: vectors of two embedders never mix)."""
    store = VectorStore(conn)
    rows = store.node_vectors(cipher.stream_id, embedder)  # in store order
    nodes, vectors = _decrypted(cipher, rows)
    triggers, attractors = stream_probes(store, cipher)
    index = SubjectIndex(config, triggers, attractors)
    index.add(nodes, vectors)
    index.mark_item_revisions(r["event_id"] for r in ItemStore(conn).stream_rows(cipher.stream_id))
    index.set_likely_updates(likely_updates(conn, cipher.stream_id))
    index.stream_id = cipher.stream_id
    return index


def likely_updates(conn: Connection, stream_id: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """The stream's open likely updates as (older node id, newer node id) pairs."""
    edges = graph_queries.open_edges(conn, stream_id, EdgeKind.LIKELY_UPDATES)
    return [(row.target_node, row.source_node) for row in edges]


def _decrypted(
    cipher: SubjectCipher, rows: Sequence[Any]
) -> tuple[list[Node], npt.NDArray[np.float32]]:
    nodes = [node_from_row(cipher, row) for row in rows]
    # The vector_store packing: little-endian float32 (see pack_vector).
    raw = [
        np.frombuffer(cipher.open("vector", row.node_id.bytes, row.embedding), dtype="<f4")
        for row in rows
    ]
    vectors = np.stack(raw).astype(np.float32) if raw else np.zeros((0, 0), dtype=np.float32)
    return nodes, vectors


_PROBE_EVENTS = frozenset(
    {ev.TRIGGER_ADDED, ev.TRIGGER_REMOVED, ev.ATTRACTOR_ADDED, ev.ATTRACTORS_CLEARED}
)
_NODE_STATE_EVENTS = frozenset(
    {
        ev.SUPERSEDED,
        ev.CONTRADICTED,
        ev.CONTRADICTION_RESOLVED,
        ev.REINFORCED,
        ev.ARCHIVED,
        ev.UNARCHIVED,
    }
)
#: What refresh() knows how to apply.  Any other event loads the subject again:
#: an ingested message's claims (memory.claims_extracted), for one, are nodes of
#: an earlier event and would sit among the old rows of a fresh load.  A keyed
#: item's new expiry (memory.item_expiry) changes nothing retrieval reads.
_UPDATE_EVENTS = frozenset({ev.LIKELY_UPDATE, ev.LIKELY_UPDATE_REJECTED})
REFRESHABLE_EVENTS = frozenset(
    {ev.STORED, ev.ITEM_EXPIRY, *_NODE_STATE_EVENTS, *_PROBE_EVENTS, *_UPDATE_EVENTS}
)


def refreshable(events: Sequence[RecordedEvent]) -> bool:
    """Whether :func:`refresh` can apply all of ``events``."""
    return all(e.type in REFRESHABLE_EVENTS for e in events)


def refresh(
    index: SubjectIndex,
    conn: Connection,
    cipher: SubjectCipher,
    events: Sequence[RecordedEvent],
    embedder: str | None = None,
) -> None:
    """Bring ``index`` up to date with ``events``, the stream's next events in
    version order, all of them already applied to the projections and all
    :func:`refreshable`.

    Stored events append their nodes; the other memory events name the nodes
    they change in their after-states, which are read again; trigger and
    attractor events recompute those terms.  Rows read here may be newer than
    the events (a later write committed meanwhile): that only repeats work on
    the next refresh, which reads those nodes again.
    """
    store = VectorStore(conn)
    with index.lock:
        # Two threads may refresh one cached index from the same token: the
        # second finds the events already applied.
        events = [e for e in events if e.version > index.version]
        if not events:
            return
        index.version = events[-1].version
        stored = [e.event_id for e in events if e.type == ev.STORED and e.data is not None]
        index.mark_item_revisions(e.event_id for e in events if _revises_item(e))
        changed = {
            uuid.UUID(node_id)
            for e in events
            if e.type in _NODE_STATE_EVENTS and e.data is not None
            for node_id in e.data["after"]
        }
        if any(e.type in _PROBE_EVENTS for e in events):
            index.set_probes(*stream_probes(store, cipher))
        if any(e.type in _UPDATE_EVENTS for e in events):
            index.set_likely_updates(likely_updates(conn, cipher.stream_id))
        order = {event_id: place for place, event_id in enumerate(stored)}
        # Nodes the index holds already are not added twice: a load reads its rows after
        # its token, so an event committed and embedded in between is in it already
        # (and, through an image, in every process that loads that image).
        rows = [
            r
            for r in store.event_node_vectors(cipher.stream_id, stored, embedder)
            if index.row_of(r.node_id) is None
        ]
        rows.sort(key=lambda r: (order[r.event_id], r.ordinal))
        nodes, vectors = _decrypted(cipher, rows)
        index.add(nodes, vectors)
        for row in GraphStore(conn).node_rows(changed) if changed else ():
            place = index.row_of(row.node_id)
            if place is not None and row.stream_id == cipher.stream_id:
                index.replace(place, node_from_row(cipher, row))


def _revises_item(event: RecordedEvent) -> bool:
    return event.type == ev.STORED and event.data is not None and ev.item_of(event.data) is not None


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


# -- ranking ------------------------------------------------------------------------------


def rank(
    index: SubjectIndex,
    query: str,
    query_vector: Sequence[float],
    now: datetime,
    wanted: NodeFilter,
    limit: int,
) -> list[ScoredNode]:
    """The ``limit`` best admitted nodes, best first, ties by node id text."""
    with index.lock:
        admitted = index.admitted(wanted)
        if not admitted.any():
            return []
        config = index.config
        dense = scoring.cosines(index.vectors, query_vector)
        bm25, attainable = _bm25(index, query)
        lexical = scoring.lexical_share(config, bm25, attainable, admitted)
        weight = scoring.query_lexical_weight(config, dense)
        matched, context = scoring.match(
            config, weight, dense, lexical, index.neighbours, index.asks, admitted
        )
        # As of a moment, memories are as fresh as they were then.
        terms = index.terms(now if wanted.as_of is None else wanted.as_of, matched)
        own = scoring.totals(config, terms)
        totals = np.where(admitted, scoring.follow_successors(own, index.successions()), -np.inf)
        best = _best(index, np.flatnonzero(admitted), totals, limit)
        channels = Channels(dense, lexical, weight, context)
        return [_scored(index, row, totals, own, terms, channels) for row in best]


def _bm25(index: SubjectIndex, query: str) -> tuple[Floats, float]:
    """Every row's BM25 score for ``query`` and the most the query could attain.

    A period the query names (:mod:`projections.dates`) is one term of it in place
    of the words that name it, held by the rows whose effective time falls within
    the period: in "What did I cook on 9 May 2023?", "9", "May" and "2023" would
    match nothing the person said, where the day matches what was said that day
    (and weighs like a word: the fewer memories of that day, the more).
    """
    period = named_period(query)
    if period is None:
        return index.lexical.scores(query), index.lexical.attainable(query)
    held = index.effective_within(period.start, period.end)
    dated, dated_attainable = index.lexical.held_term(held)
    words = period.rest
    return index.lexical.scores(words) + dated, index.lexical.attainable(words) + dated_attainable


def _best(index: SubjectIndex, admitted: Rows, totals: Floats, limit: int) -> list[int]:
    """The ``limit`` best admitted rows, ties (within TIE_MARGIN) by node id text."""
    if len(admitted) > limit:
        kth = np.partition(totals[admitted], len(admitted) - limit)[len(admitted) - limit]
        near = admitted[totals[admitted] >= kth - TIE_MARGIN]
    else:
        near = admitted
    ordered = sorted(near.tolist(), key=lambda row: (-totals[row], str(index.nodes[row].id)))
    return ordered[:limit]


@dataclass(frozen=True)
class Channels:
    """What the two channels gave every row for one query, and how they were fused."""

    dense: Floats
    lexical: Floats
    #: λ_q: the lexical channel's weight for this query (scoring.query_lexical_weight).
    lexical_weight: float
    context: Floats


def _scored(
    index: SubjectIndex,
    row: int,
    totals: Floats,
    own: Floats,
    terms: scoring.Terms,
    channels: Channels,
) -> ScoredNode:
    components = ScoreComponents(
        similarity=max(float(channels.dense[row]), 0.0),
        lexical=float(channels.lexical[row]),
        lexical_weight=channels.lexical_weight,
        context=float(channels.context[row]),
        recency=float(terms.recency[row]),
        salience=float(terms.salience[row]),
        reinforcement=float(terms.reinforcement[row]),
        confidence=float(terms.confidence[row]),
        source_confidence=float(terms.source_confidence[row]),
        trigger_boost=float(terms.trigger_boost[row]),
        attractor_penalty=float(terms.attractor_penalty[row]),
        accesses=int(index.accesses[row]),
        succession=float(totals[row] - own[row]),
    )
    # A copy: callers may change the meta dict, the cached node must not change.
    node = index.nodes[row]
    meta = copy.deepcopy(node.meta)
    return ScoredNode(dataclasses.replace(node, meta=meta), float(totals[row]), components)


# -- the cache ------------------------------------------------------------------------------


class RetrievalCache:
    """Least-recently-used subject indexes, bounded by their total number of nodes.

    Thread-safe: the engine may retrieve from several threads.  A subject is
    loaded (or refreshed) outside the cache's lock; two threads loading the same
    subject at once both succeed and the later one stays.
    """

    def __init__(self, max_nodes: int = DEFAULT_MAX_CACHED_NODES) -> None:
        self.max_nodes = max_nodes
        #: subject → (token, index, its size when kept): indexes grow in place.
        self._entries: OrderedDict[str, tuple[StateToken, SubjectIndex, int]] = OrderedDict()
        self._nodes = 0
        self._lock = threading.Lock()

    def entry(self, subject: str) -> tuple[StateToken, SubjectIndex] | None:
        """The cached index and the token it was last brought up to, if any."""
        with self._lock:
            found = self._entries.get(subject)
            if found is None:
                return None
            self._entries.move_to_end(subject)
            return found[0], found[1]

    def put(self, subject: str, token: StateToken, index: SubjectIndex) -> None:
        """Keep ``index``, evicting the least recently used until it fits."""
        with self._lock:
            self._remove(subject)
            if len(index) > self.max_nodes:
                return  # larger than the whole budget: scored once, never kept
            while self._entries and self._nodes + len(index) > self.max_nodes:
                self._remove(next(iter(self._entries)))
            self._entries[subject] = (token, index, len(index))
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
            self._nodes -= entry[2]
