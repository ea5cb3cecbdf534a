"""Retrieval scoring: the one implementation of the score, over arrays, no I/O.

Every function here takes one value per candidate node (numpy arrays) and
returns one value per node; the retrieval index (:mod:`projections.retrieval_index`)
gathers those inputs and calls them, and nothing else computes a score.

score = relevance × (1 + trigger boost) × (1 − attractor penalty), where

* match = (1 − λ_q) · dense + λ_q · lexical, plus the context its session
  lends it (:func:`match`): in a conversation the answer to a question often
  sits a turn or two away from the words the question repeats, above all in
  the reply to a turn that asked something;
* λ_q is the query's lexical weight (:func:`query_lexical_weight`): λ, lowered
  where the dense channel's first answer stands clear of its second;
* dense is the cosine of the query and node embeddings (clamped at 0) and
  lexical the node's BM25 score against what the query could attain
  (:func:`lexical_share`), both in [0, 1];
* relevance mixes match with recency (retention: :func:`retention`, which
  importance, confirmations and how often retrieval returned the node slow
  down), salience, reinforcement and confidence (the node's own, times the
  caller-supplied source confidence from ``meta["confidence"]``);
* trigger boost = γ · max over triggers of (strength · weight), strength being
  1 for a keyword contained in the node text, or the cosine for a text
  trigger at or above its threshold;
* attractor penalty = δ · max over attractors of (severity · cosine), counting
  only attractors whose cosine reaches the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from eventstore.errors import InvalidInputError
from projections.model import Node

MAX_TRIGGER_WEIGHT = 10.0

Floats = npt.NDArray[np.float64]
Vectors = npt.NDArray[np.float32]


class ScoringConfigError(InvalidInputError):
    """A ScoringConfig field lies outside its allowed range."""


#: (low, high) bounds of every field, both inclusive; ``None`` for unbounded.
_BOUNDS: dict[str, tuple[float, float | None]] = {
    "similarity_weight": (0.0, None),
    "recency_weight": (0.0, None),
    "salience_weight": (0.0, None),
    "reinforcement_weight": (0.0, None),
    "confidence_weight": (0.0, None),
    "lexical_weight": (0.0, 1.0),
    "lexical_scale": (1e-6, 1.0),
    "dense_margin_weight": (0.0, 10.0),
    "session_context_weight": (0.0, 1.0),
    "reply_context_weight": (0.0, 1.0),
    "distant_context_weight": (0.0, 1.0),
    "recency_half_life_days": (1e-6, None),
    "access_weight": (0.0, 10.0),
    "trigger_retrieval_boost": (0.0, None),
    "negative_attractor_penalty": (0.0, 1.0),
    "negative_attractor_threshold": (-1.0, 1.0),
}


@dataclass(frozen=True)
class ScoringConfig:
    """The weights and knobs of the score (see the module docstring and docs/retrieval.md).

    Out-of-range values are refused with :class:`ScoringConfigError` rather than
    clamped, so that a configuration means what it says.
    """

    similarity_weight: float = 0.6
    recency_weight: float = 0.1
    salience_weight: float = 0.1
    reinforcement_weight: float = 0.1
    confidence_weight: float = 0.1
    #: λ: the lexical (BM25) channel's share of the match; 0 is dense only, 1 lexical only.
    lexical_weight: float = 0.7
    #: How BM25 becomes the lexical channel's [0, 1] (see :func:`lexical_share`):
    #: ``"attainable"`` or ``"best"`` (divided by the best candidate's, before 2026-12).
    lexical_normalisation: str = "attainable"
    #: The share of the query's attainable BM25 score that counts as a full match.
    lexical_scale: float = 0.5
    #: μ: how much the dense channel's margin lowers λ for a query (see
    #: :func:`query_lexical_weight`); 0 weighs every query by λ itself.
    dense_margin_weight: float = 0.5
    #: κ: how much of the best session neighbour's match a node adds to its own; 0 is off.
    session_context_weight: float = 0.4
    #: κ for the reply: the node right after a session turn that asked a question ("?").
    reply_context_weight: float = 0.8
    #: κ for the session's turns two away (often the same speaker going on); 0 is off.
    distant_context_weight: float = 0.6
    recency_half_life_days: float = 30.0
    #: α: how much each retrieval slows a memory's fading (see :func:`access_factor`); 0 is off.
    access_weight: float = 0.5
    trigger_retrieval_boost: float = 0.5  # γ
    negative_attractor_penalty: float = 0.5  # δ, in [0, 1]
    negative_attractor_threshold: float = 0.3

    def __post_init__(self) -> None:
        for field in fields(self):
            if field.name in _CHOICES:
                _check_choice(field.name, getattr(self, field.name))
            else:
                _check_bound(field.name, getattr(self, field.name))


#: The allowed values of the fields that are a choice, not a number.
_CHOICES = {"lexical_normalisation": ("attainable", "best")}


def _check_choice(name: str, value: object) -> None:
    allowed = _CHOICES[name]
    if value not in allowed:
        raise ScoringConfigError(f"ScoringConfig.{name} must be one of {allowed}, not {value!r}")


def _check_bound(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScoringConfigError(f"ScoringConfig.{name} must be a finite number, not {value!r}")
    low, high = _BOUNDS[name]
    if value < low or (high is not None and value > high):
        allowed = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ScoringConfigError(f"ScoringConfig.{name} must be {allowed}, not {value!r}")


@dataclass(frozen=True)
class TriggerProbe:
    keyword: str | None
    vector: Sequence[float] | None
    weight: float
    threshold: float


@dataclass(frozen=True)
class AttractorProbe:
    vector: Sequence[float]
    severity: float


# -- per-node inputs that do not depend on the query --------------------------------------


def retention_stretch(salience: float, confirmations: int) -> float:
    """How much slower than the half-life a node fades: important and
    often-confirmed memories outlive untouched newer ones (how often it was
    retrieved is :func:`access_factor`'s part, kept apart: it changes on reads)."""
    return (1 + salience) * (1 + math.log1p(confirmations))


def access_factor(config: ScoringConfig, accesses: Floats) -> Floats:
    """1 + α · ln(1 + count): the stretch a node's retrievals add to its half-life.

    Logarithmic, so the first few retrievals matter most and a memory returned
    thousands of times cannot become immortal: at α = 0.5, 10 retrievals make
    it fade 2.2 times slower, 1,000 retrievals 4.5 times.
    """
    result: Floats = 1.0 + config.access_weight * np.log1p(np.maximum(accesses, 0.0))
    return result


def source_confidence(node: Node) -> float:
    value = node.meta.get("confidence", 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 1.0
    return min(max(float(value), 0.0), 1.0)


def cosines(vectors: Vectors, probe: Sequence[float]) -> Floats:
    """Cosine of every (unit) row with ``probe``, in float32 like the stored vectors.

    numpy's own single-threaded einsum loop, not BLAS: on a busy machine BLAS's
    threads cost more in wake-ups than they save on a matrix-vector product,
    and the float32 matrix is read as it is, never copied.  Each row's product
    depends on that row alone, so a row scores the same whatever else the
    matrix holds (an index grown row by row agrees with one loaded at once).
    """
    if len(vectors) == 0:
        return np.zeros(0, dtype=np.float64)
    target = np.asarray(probe, dtype=np.float32)
    products: Floats = np.einsum("ij,j->i", vectors, target).astype(np.float64)
    return products


def trigger_boosts(
    config: ScoringConfig,
    texts: Sequence[str],
    vectors: Vectors,
    triggers: Sequence[TriggerProbe],
) -> Floats:
    """γ · max over triggers of (strength · weight), per node; ``texts`` casefolded."""
    if not triggers or not texts:
        return np.zeros(len(texts), dtype=np.float64)
    strengths = []
    for trigger in triggers:
        if trigger.keyword is not None:
            keyword = trigger.keyword.casefold()
            strength = np.fromiter((keyword in t for t in texts), dtype=np.float64)
        elif trigger.vector is None:
            strength = np.zeros(len(texts), dtype=np.float64)
        else:
            cos = cosines(vectors, trigger.vector)
            strength = np.where(cos >= trigger.threshold, cos, 0.0)
        strengths.append(strength * trigger.weight)
    best: Floats = np.max(np.stack(strengths), axis=0)
    return config.trigger_retrieval_boost * best


def attractor_penalties(
    config: ScoringConfig, vectors: Vectors, attractors: Sequence[AttractorProbe]
) -> Floats:
    """min(δ · max over near attractors of (severity · cosine), 1) per node."""
    if not attractors or len(vectors) == 0:
        return np.zeros(len(vectors), dtype=np.float64)
    strengths = []
    for attractor in attractors:
        cos = cosines(vectors, attractor.vector)
        near = cos >= config.negative_attractor_threshold
        strengths.append(np.where(near, attractor.severity * cos, -np.inf))
    best = np.max(np.stack(strengths), axis=0)
    best = np.where(np.isneginf(best), 0.0, best)
    penalty: Floats = np.minimum(config.negative_attractor_penalty * best, 1.0)
    return penalty


# -- the query-dependent terms --------------------------------------------------------------


def retention(config: ScoringConfig, age_days: Floats, stretch: Floats, accesses: Floats) -> Floats:
    """How alive each memory still is: halves every half-life × stretch × access factor.

    Importance and confirmations (``stretch``, :func:`retention_stretch`) and
    how often retrieval returned the memory (``accesses``, :func:`access_factor`)
    both slow the fading, so a frequently used old memory outlives an untouched
    newer one.  Retrieval's recency term and the archiving job's choice of what
    leaves the retrieval tier are both this function.
    """
    slowed = config.recency_half_life_days * stretch * access_factor(config, accesses)
    result: Floats = np.exp(-math.log(2) * np.maximum(age_days, 0.0) / slowed)
    return result


def lexical_share(
    config: ScoringConfig,
    bm25: Floats,
    attainable: float,
    admitted: npt.NDArray[np.bool_] | None = None,
) -> Floats:
    """The lexical channel in [0, 1]: each node's BM25 score against what the query
    could attain (``attainable``: the score of a memory holding every query term,
    see :meth:`~projections.lexical.LexicalIndex.attainable`), times ``1 / lexical_scale``
    and capped at 1 (``"best"``: divided by the best ``admitted`` node's score).

    Measured against the best candidate's score instead (``"best"``), one shared
    common word makes a perfect lexical match whenever nothing matches better;
    against the attainable score, a memory that shares one of a query's four
    terms scores what that term is worth.
    """
    if config.lexical_normalisation == "best":
        candidates = bm25 if admitted is None else np.where(admitted, bm25, 0.0)
        scale = float(candidates.max(initial=0.0))
    else:
        scale = attainable * config.lexical_scale
    if scale <= 0:
        return np.zeros_like(bm25)
    share: Floats = np.minimum(bm25 / scale, 1.0)
    return share


def query_lexical_weight(config: ScoringConfig, dense: Floats) -> float:
    """λ_q, the lexical channel's weight for one query: λ / (1 + μ · margin).

    The margin is how far the dense channel's best node stands above its second
    best, in standard deviations of all the nodes' cosines (so it means the same
    whatever range an embedder's cosines span).  All the subject's indexed nodes
    count, whatever the query's filters admit: a filter chooses among the ranking
    and never changes a score.  Where the dense channel has one clear answer, a
    memory that shares a single common word with the question ("a living" and
    "lives", "small children" and "a small workshop") no longer outranks it;
    where its best candidates lie close together, as over hundreds of
    conversation turns, the lexical channel keeps nearly all of λ and decides.
    """
    count = len(dense)
    if config.dense_margin_weight == 0 or count < 2:
        return config.lexical_weight
    # One pass for the variance and two for the best two: np.std and np.partition
    # cost 0.4 ms at 10,000 nodes, these 0.02.
    mean = float(dense.mean())
    variance = float(np.dot(dense, dense)) / count - mean * mean
    if variance <= 0:
        return config.lexical_weight
    best = int(np.argmax(dense))
    second = max(dense[:best].max(initial=-np.inf), dense[best + 1 :].max(initial=-np.inf))
    margin = (float(dense[best]) - float(second)) / math.sqrt(variance)
    return config.lexical_weight / (1 + config.dense_margin_weight * margin)


def match(
    config: ScoringConfig,
    weight: float,
    dense: Floats,
    lexical: Floats,
    neighbours: npt.NDArray[np.intp],
    asks: npt.NDArray[np.bool_],
    admitted: npt.NDArray[np.bool_],
) -> tuple[Floats, Floats]:
    """(match, context) per node: the fused channels plus the context its session lends.

    ``weight`` is the query's lexical weight (:func:`query_lexical_weight`).
    All arrays are over the same nodes; ``neighbours`` has two columns, the
    positions of the node's previous and next node in its session, -1 where
    there is none, and ``asks`` says which nodes ask a question.  The context
    is the largest of κ times the fused value of the previous or next node
    (κ_reply for the previous one when it asked a question: the node is its
    reply) and κ_distant times that of the nodes two turns away.  A node the
    query does not admit lends nothing.
    """
    fused = (1 - weight) * np.maximum(dense, 0.0) + weight * lexical
    lent = np.append(np.where(admitted, fused, 0.0), 0.0)  # position -1 reads the final 0
    previous, following = neighbours[:, 0], neighbours[:, 1]
    asked = np.append(asks, False)[previous]
    near = np.maximum(
        np.where(asked, config.reply_context_weight, config.session_context_weight)
        * lent[previous],
        config.session_context_weight * lent[following],
    )
    # Two turns away: the previous node's previous and the next node's next.
    beyond = np.append(neighbours, [[-1, -1]], axis=0)
    distant = np.maximum(lent[beyond[previous, 0]], lent[beyond[following, 1]])
    context: Floats = np.maximum(near, config.distant_context_weight * distant)
    return fused + context, context


#: How far above the memory it replaced a successor ranks: enough to sort above it
#: (ties within retrieval_index.TIE_MARGIN are ordered by node id), nothing a score shows.
SUCCESSION_MARGIN = 1e-9


def follow_successors(totals: Floats, successions: npt.NDArray[np.intp]) -> Floats:
    """The totals with each successor raised to just above the memory it replaced.

    ``successions`` holds (old, successor) row pairs.  A question that matches an
    old memory finds its successor where the old one would have ranked, and the
    old one (when the query admits it: a note whose claims were replaced, or
    ``include_superseded``) right below.  Chains (A replaced by B, B by C) pass
    the rank on to their end, through links the query does not admit; whether a
    successor is returned is still the query's filter's decision.
    """
    if len(successions) == 0:
        return totals
    raised = totals.copy()
    old, new = successions[:, 0], successions[:, 1]
    for _ in range(len(successions)):  # a chain is at most as long as the pairs
        lifted = np.maximum(raised[new], raised[old] + SUCCESSION_MARGIN)
        changed = lifted > raised[new]
        if not changed.any():
            break
        np.maximum.at(raised, new[changed], lifted[changed])
    return raised


@dataclass(frozen=True)
class Terms:
    """One value per candidate for every input of the score."""

    match: Floats
    recency: Floats
    salience: Floats
    reinforcement: Floats
    confidence: Floats
    source_confidence: Floats
    trigger_boost: Floats
    attractor_penalty: Floats


def totals(config: ScoringConfig, terms: Terms) -> Floats:
    """The score of every candidate (see the module docstring)."""
    relevance = (
        config.similarity_weight * terms.match
        + config.recency_weight * terms.recency
        + config.salience_weight * terms.salience
        + config.reinforcement_weight * terms.reinforcement
        + config.confidence_weight * terms.confidence * terms.source_confidence
    )
    total: Floats = relevance * (1 + terms.trigger_boost) * (1 - terms.attractor_penalty)
    return total
