"""ScoringConfig refuses values outside their ranges instead of clamping them."""

from __future__ import annotations

import math

import pytest

from eventstore import InvalidInputError
from projections.scoring import ScoringConfig, ScoringConfigError


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("negative_attractor_penalty", 1.5),
        ("negative_attractor_penalty", -0.1),
        ("negative_attractor_threshold", -5),
        ("negative_attractor_threshold", 1.01),
        ("lexical_weight", 1.2),
        ("session_context_weight", -0.5),
        ("reply_context_weight", 1.5),
        ("distant_context_weight", -0.1),
        ("lexical_scale", 0),
        ("lexical_scale", 2),
        ("lexical_normalisation", "rrf"),
        ("lexical_normalisation", 1),
        ("similarity_weight", -1),
        ("trigger_retrieval_boost", -0.5),
        ("recency_half_life_days", 0),
        ("recency_weight", math.nan),
        ("salience_weight", math.inf),
        ("confidence_weight", True),
        ("reinforcement_weight", "0.1"),
    ],
)
def test_out_of_range_values_are_refused(field: str, value: object) -> None:
    with pytest.raises(ScoringConfigError, match=f"ScoringConfig.{field} must be"):
        ScoringConfig(**{field: value})  # type: ignore[arg-type]


def test_the_error_is_an_invalid_input_error_and_bounds_are_inclusive() -> None:
    assert issubclass(ScoringConfigError, InvalidInputError)
    edges = ScoringConfig(
        negative_attractor_penalty=1.0,
        negative_attractor_threshold=-1.0,
        lexical_weight=0.0,
        session_context_weight=1.0,
        similarity_weight=0,
    )
    assert edges.negative_attractor_penalty == 1.0
    assert edges.negative_attractor_threshold == -1.0
