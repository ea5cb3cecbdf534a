"""Retrieval scoring: pure functions, no I/O.

score = relevance × (1 + trigger boost) × (1 − attractor penalty), where

* relevance mixes similarity with recency (retention), salience,
  reinforcement and confidence (the node's own, times the caller-supplied
  source confidence from ``meta["confidence"]``);
* trigger boost = γ · max over triggers of (strength · weight), strength being
  1 for a keyword contained in the node text, or the cosine for a text
  trigger at or above its threshold;
* attractor penalty = δ · max over attractors of (severity · cosine), counting
  only attractors whose cosine reaches the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from projections.embedders import cosine
from projections.model import REINFORCEMENT_CAP, Node, ScoreComponents, ScoredNode

MAX_TRIGGER_WEIGHT = 10.0


@dataclass(frozen=True)
class ScoringConfig:
    similarity_weight: float = 0.6
    recency_weight: float = 0.1
    salience_weight: float = 0.1
    reinforcement_weight: float = 0.1
    confidence_weight: float = 0.1
    recency_half_life_days: float = 30.0
    trigger_retrieval_boost: float = 0.5  # γ
    negative_attractor_penalty: float = 0.5  # δ, in [0, 1]
    negative_attractor_threshold: float = 0.3


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


def retention(node: Node, now: datetime, half_life_days: float) -> float:
    """How alive a memory still is: decays with age, slower for important and
    often-confirmed memories, so they outlive untouched newer ones."""
    last_touch = node.last_reinforced_at or node.created_at
    age_days = max((now - last_touch).total_seconds(), 0.0) / 86_400
    stretch = (1 + node.salience_base) * (1 + math.log1p(node.reinforcement_count))
    return math.exp(-math.log(2) * age_days / (half_life_days * stretch))


def source_confidence(node: Node) -> float:
    value = node.meta.get("confidence", 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 1.0
    return min(max(float(value), 0.0), 1.0)


def trigger_boost(
    config: ScoringConfig, node: Node, vector: Sequence[float], triggers: Sequence[TriggerProbe]
) -> float:
    text = node.content.casefold()
    strengths = [_trigger_strength(t, text, vector) * t.weight for t in triggers]
    return config.trigger_retrieval_boost * max(strengths, default=0.0)


def _trigger_strength(trigger: TriggerProbe, text: str, vector: Sequence[float]) -> float:
    if trigger.keyword is not None:
        return 1.0 if trigger.keyword.casefold() in text else 0.0
    if trigger.vector is None:
        return 0.0
    similarity = cosine(trigger.vector, vector)
    return similarity if similarity >= trigger.threshold else 0.0


def attractor_penalty(
    config: ScoringConfig, vector: Sequence[float], attractors: Sequence[AttractorProbe]
) -> float:
    strengths = [
        a.severity * similarity
        for a in attractors
        if (similarity := cosine(a.vector, vector)) >= config.negative_attractor_threshold
    ]
    return min(config.negative_attractor_penalty * max(strengths, default=0.0), 1.0)


def score(
    config: ScoringConfig,
    node: Node,
    vector: Sequence[float],
    query: Sequence[float],
    now: datetime,
    triggers: Sequence[TriggerProbe] = (),
    attractors: Sequence[AttractorProbe] = (),
) -> ScoredNode:
    components = ScoreComponents(
        similarity=max(cosine(query, vector), 0.0),
        recency=retention(node, now, config.recency_half_life_days),
        salience=node.salience_base,
        reinforcement=node.reinforcement_boost / REINFORCEMENT_CAP,
        confidence=node.confidence_base,
        source_confidence=source_confidence(node),
        trigger_boost=trigger_boost(config, node, vector, triggers),
        attractor_penalty=attractor_penalty(config, vector, attractors),
    )
    relevance = (
        config.similarity_weight * components.similarity
        + config.recency_weight * components.recency
        + config.salience_weight * components.salience
        + config.reinforcement_weight * components.reinforcement
        + config.confidence_weight * components.confidence * components.source_confidence
    )
    total = relevance * (1 + components.trigger_boost) * (1 - components.attractor_penalty)
    return ScoredNode(node, total, components)
