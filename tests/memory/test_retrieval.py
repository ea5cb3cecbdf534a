"""Retrieval over the vector state: read-your-writes, score components, filters,
and the correction mechanisms (recency, resonance triggers, negative
attractors, caller metadata), which are events and so survive a restart."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from eventstore import InvalidInputError
from oblivio import MemoryClient, NodeType, Scope, ScoredNode, SourceType
from projections.model import ScoreComponents
from projections.scoring import ScoringConfig, retention_stretch
from tests.conftest import WITH_CITUS
from tests.memory._support import rejects, remember
from tests.memory.conftest import Opener

# The tests below marked with this run on the Citus tier too (each Citus test costs
# seconds, so the tier takes the ones that speak for the promise).
ALSO_ON_CITUS = pytest.mark.parametrize("memory_settings", WITH_CITUS, indirect=True)

QUERY = "What is my account balance?"
OLD = "Account balance: 850 EUR"
NEW = "Account balance: 1,247.38 EUR"


def expected_score(c: ScoreComponents, config: ScoringConfig | None = None) -> float:
    """The documented formula (docs/retrieval.md), from the returned components."""
    config = config or ScoringConfig()
    match = (1 - c.lexical_weight) * c.similarity + c.lexical_weight * c.lexical + c.context
    relevance = (
        config.similarity_weight * match
        + config.recency_weight * c.recency
        + config.salience_weight * c.salience
        + config.reinforcement_weight * c.reinforcement
        + config.confidence_weight * c.confidence * c.source_confidence
    )
    return relevance * (1 + c.trigger_boost) * (1 - c.attractor_penalty) + c.succession


def ranked(memory: MemoryClient, query: str = QUERY, **filters: object) -> dict[str, ScoredNode]:
    """Results by content, best first (dicts keep insertion order)."""
    results = memory.retrieve(query, user_id="alice", **filters).results  # type: ignore[arg-type]
    return {r.node.content: r for r in results}


def balances(memory: MemoryClient) -> None:
    remember(memory, OLD)
    remember(memory, NEW)


# -- basics -----------------------------------------------------------------------------


@ALSO_ON_CITUS
def test_retrieval_sees_the_callers_last_write(memory: MemoryClient) -> None:
    assert memory.retrieve("anything", user_id="alice").results == []
    for i in range(25):
        memory.store(f"note number {i} about the garden", user_id="alice")
        memory.store(f"unrelated entry {i}", user_id="bob")
    memory.store("The spare key is under the blue flowerpot.", user_id="alice")

    top = memory.retrieve("where is the spare key", user_id="alice", limit=3)

    assert len(top.results) == 3
    assert top.nodes[0].content == "The spare key is under the blue flowerpot."
    assert top.query == "where is the spare key"


def test_every_score_component_is_returned(memory: MemoryClient) -> None:
    _, node = remember(memory, "I keep bees in the garden.")
    memory.reinforce(node.id, user_id="alice")

    [result] = memory.retrieve("I keep bees in the garden.", user_id="alice").results
    c = result.components

    assert c.similarity == pytest.approx(1.0)
    assert 0.99 < c.recency <= 1.0
    assert (c.salience, c.confidence, c.source_confidence) == pytest.approx((0.5, 0.75, 1.0))
    assert c.reinforcement == pytest.approx(0.15 / 0.5)
    assert (c.trigger_boost, c.attractor_penalty) == (0.0, 0.0)
    assert result.score == pytest.approx(expected_score(c))


def test_scores_follow_the_formula_and_the_order(memory: MemoryClient) -> None:
    balances(memory)
    remember(memory, "My balance is 1,200 EUR")
    memory.add_resonance_trigger(user_id="alice", keyword="1,200", weight=0.5)
    memory.add_negative_attractor(OLD, user_id="alice", severity=0.5)

    results = memory.retrieve(QUERY, user_id="alice").results

    assert len(results) == 3
    for result in results:
        assert result.score == pytest.approx(expected_score(result.components))
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    assert len(memory.retrieve(QUERY, user_id="alice", limit=1).results) == 1


@ALSO_ON_CITUS
def test_filters(memory: MemoryClient) -> None:
    remember(memory, "balance fact")
    remember(memory, "balance note", node_type=NodeType.NOTE)
    remember(memory, "balance entity", node_type="entity")
    remember(memory, "balance preference", node_type="preference", scope="project")
    remember(memory, "balance import", source_type=SourceType.IMPORTED, scope=Scope.PROJECT)

    def found(**filters: object) -> set[str]:
        return set(ranked(memory, "balance", **filters))

    everything = {
        "balance fact",
        "balance note",
        "balance entity",
        "balance preference",
        "balance import",
    }
    assert found() == everything
    assert found(scopes={"project"}) == {"balance preference", "balance import"}
    assert found(node_types={NodeType.PREFERENCE, "note"}) == {"balance preference", "balance note"}
    assert found(exclude_node_types={NodeType.NOTE, NodeType.ENTITY}) == everything - {
        "balance note",
        "balance entity",
    }
    assert found(source_types={SourceType.IMPORTED}) == {"balance import"}
    assert found(scopes=["personal"], source_types=["user_stated"], node_types=["fact"]) == {
        "balance fact"
    }
    for bad in (
        {"scopes": ["galaxy"]},
        {"node_types": ["rumour"]},
        {"exclude_node_types": ["x"]},
        {"source_types": ["hearsay"]},
    ):
        rejects(
            memory,
            lambda b=bad: memory.retrieve("balance", user_id="alice", **b),
            InvalidInputError,
        )


def test_superseded_nodes_are_excluded_unless_asked_for(memory: MemoryClient) -> None:
    _, old = remember(memory, OLD)
    _, new = remember(memory, NEW)
    memory.supersede(old.id, new.id, user_id="alice")

    assert list(ranked(memory)) == [NEW]
    assert set(ranked(memory, include_superseded=True)) == {OLD, NEW}


# -- 1. recency and retention ------------------------------------------------------------


def test_recency_decays_slower_for_confirmed_memories(memory: MemoryClient) -> None:
    _, plain = remember(memory, "I water the roses on Sundays.")
    _, confirmed = remember(memory, "I water the tulips on Sundays.")
    memory.reinforce(confirmed.id, user_id="alice")
    later = memory.context.clock() + timedelta(days=30)
    memory.context.clock = lambda: later

    results = ranked(memory, "water on Sundays")
    stored = {r.node.content: r.node for r in results.values()}

    plain_recency = results["I water the roses on Sundays."].components.recency
    confirmed_recency = results["I water the tulips on Sundays."].components.recency
    node = stored[plain.content]
    age_days = (later - node.created_at).total_seconds() / 86_400
    stretch = retention_stretch(node.salience_base, node.reinforcement_count)
    assert plain_recency == pytest.approx(2 ** (-age_days / (30.0 * stretch)))
    assert plain_recency == pytest.approx(2 ** (-1 / 1.5), rel=1e-3)  # 30 days, salience 0.5
    assert confirmed_recency == pytest.approx(2 ** (-1 / (1.5 * (1 + math.log(2)))), rel=1e-3)
    assert confirmed_recency > plain_recency


# -- 2. resonance triggers ---------------------------------------------------------------


def test_a_value_trigger_promotes_the_corrected_fact(memory: MemoryClient) -> None:
    balances(memory)
    before = ranked(memory)
    assert list(before) == [OLD, NEW]  # the stale value is more similar to the query
    assert before[OLD].components.similarity > before[NEW].components.similarity

    memory.add_resonance_trigger(user_id="alice", keyword="balance", weight=1.0)
    topic = ranked(memory)
    assert list(topic) == [OLD, NEW]  # a topic trigger lifts both
    assert topic[OLD].components.trigger_boost == topic[NEW].components.trigger_boost == 0.5

    memory.add_resonance_trigger(user_id="alice", keyword="1,247.38", weight=5.0)
    after = ranked(memory)
    assert list(after) == [NEW, OLD]
    assert after[NEW].components.trigger_boost == pytest.approx(0.5 * 5.0)  # γ · weight
    assert after[OLD].components.trigger_boost == pytest.approx(0.5)


def test_trigger_weight_bounds(memory: MemoryClient) -> None:
    balances(memory)
    for weight in (-0.01, 10.01, math.nan, math.inf, True, "5"):
        rejects(
            memory,
            lambda w=weight: memory.add_resonance_trigger(user_id="alice", keyword="x", weight=w),
            InvalidInputError,
        )
    for threshold in (-1.5, 1.01):
        rejects(
            memory,
            lambda t=threshold: memory.add_resonance_trigger(
                user_id="alice", text="x", threshold=t
            ),
            InvalidInputError,
        )
    rejects(memory, lambda: memory.add_resonance_trigger(user_id="alice"), InvalidInputError)
    rejects(
        memory,
        lambda: memory.add_resonance_trigger(user_id="alice", keyword="x", text="y"),
        InvalidInputError,
    )
    rejects(
        memory, lambda: memory.add_resonance_trigger(user_id="alice", keyword=""), InvalidInputError
    )

    memory.add_resonance_trigger(user_id="alice", keyword="1,247.38", weight=10)
    assert ranked(memory)[NEW].components.trigger_boost == pytest.approx(5.0)


def test_weight_zero_silences_a_trigger(memory: MemoryClient) -> None:
    balances(memory)
    plain = ranked(memory)
    memory.add_resonance_trigger(user_id="alice", keyword="1,247.38", weight=0)

    silenced = ranked(memory)

    assert list(silenced) == list(plain) == [OLD, NEW]
    assert silenced[NEW].components.trigger_boost == 0.0
    assert silenced[NEW].score == pytest.approx(plain[NEW].score, rel=1e-6)


def test_a_text_trigger_matches_by_embedding_above_its_threshold(memory: MemoryClient) -> None:
    balances(memory)
    strict = memory.add_resonance_trigger(user_id="alice", text=NEW, weight=2.0, threshold=0.9)
    results = ranked(memory)
    assert results[NEW].components.trigger_boost == pytest.approx(0.5 * 2.0)
    assert results[OLD].components.trigger_boost == 0.0  # cosine ≈ 0.55, below 0.9

    memory.remove_resonance_trigger(strict, user_id="alice")
    memory.add_resonance_trigger(user_id="alice", text=NEW, weight=2.0, threshold=0.5)
    results = ranked(memory)
    assert 0.0 < results[OLD].components.trigger_boost < results[NEW].components.trigger_boost


def test_removing_a_trigger_removes_its_boost(memory: MemoryClient) -> None:
    balances(memory)
    trigger = memory.add_resonance_trigger(user_id="alice", keyword="1,247.38", weight=5.0)
    assert list(ranked(memory)) == [NEW, OLD]
    memory.remove_resonance_trigger(trigger, user_id="alice")
    assert list(ranked(memory)) == [OLD, NEW]
    assert ranked(memory)[NEW].components.trigger_boost == 0.0


@ALSO_ON_CITUS
def test_triggers_are_per_owner(memory: MemoryClient) -> None:
    balances(memory)
    memory.store(NEW, user_id="bob")
    memory.add_resonance_trigger(user_id="bob", keyword="1,247.38", weight=5.0)
    assert ranked(memory)[NEW].components.trigger_boost == 0.0
    [bobs] = memory.retrieve(QUERY, user_id="bob").results
    assert bobs.components.trigger_boost == pytest.approx(2.5)


# -- 3. negative attractors --------------------------------------------------------------


def test_an_attractor_demotes_what_resembles_it(memory: MemoryClient) -> None:
    balances(memory)
    plain = ranked(memory)
    memory.add_negative_attractor(
        OLD, user_id="alice", description="stale ERP sync", source="user_correction"
    )

    demoted = ranked(memory)

    assert memory.negative_attractor_count(user_id="alice") == 1
    assert list(demoted) == [NEW, OLD]
    assert demoted[OLD].components.attractor_penalty == pytest.approx(0.5)  # δ · 1 · cos 1
    assert demoted[OLD].score == pytest.approx(plain[OLD].score * 0.5, rel=1e-6)
    assert 0.0 < demoted[NEW].components.attractor_penalty < 0.5  # aligned, less so


def test_attractor_severity_threshold_and_penalty(memory: MemoryClient, reopen: Opener) -> None:
    balances(memory)
    memory.add_negative_attractor(OLD, user_id="alice", severity=0.5)
    memory.add_negative_attractor("tomatoes cucumbers gardening", user_id="alice")
    results = ranked(memory)
    assert results[OLD].components.attractor_penalty == pytest.approx(0.5 * 0.5)
    # The default embedder (wordllama) puts NEW at cosine ≈ 0.87 from OLD: ≥ 0.3.
    assert results[NEW].components.attractor_penalty > 0.0

    strict = reopen(ScoringConfig(negative_attractor_threshold=0.9))
    results = ranked(strict)
    assert results[NEW].components.attractor_penalty == 0.0  # below the threshold now
    assert results[OLD].components.attractor_penalty == pytest.approx(0.25)

    full = reopen(ScoringConfig(negative_attractor_penalty=1.0))
    memory.add_negative_attractor(OLD, user_id="alice", severity=1.0)
    results = ranked(full)
    assert results[OLD].components.attractor_penalty == pytest.approx(1.0)
    assert results[OLD].score == pytest.approx(0.0, abs=1e-6)  # vectors are stored as float32
    for severity in (-0.1, 1.1, math.nan):
        rejects(
            memory,
            lambda s=severity: memory.add_negative_attractor(OLD, user_id="alice", severity=s),
            InvalidInputError,
        )


def test_clearing_attractors(memory: MemoryClient) -> None:
    balances(memory)
    memory.add_negative_attractor(OLD, user_id="alice")
    memory.add_negative_attractor(NEW, user_id="alice")
    memory.add_negative_attractor(NEW, user_id="bob")
    assert memory.negative_attractor_count(user_id="alice") == 2

    memory.clear_negative_attractors(user_id="alice")

    assert memory.negative_attractor_count(user_id="alice") == 0
    assert memory.negative_attractor_count(user_id="bob") == 1
    assert memory.negative_attractor_count(user_id="nobody") == 0
    assert all(r.components.attractor_penalty == 0.0 for r in ranked(memory).values())


# -- persistence -------------------------------------------------------------------------


@ALSO_ON_CITUS
def test_triggers_and_attractors_survive_reopening(memory: MemoryClient, reopen: Opener) -> None:
    balances(memory)
    memory.add_resonance_trigger(user_id="alice", keyword="1,247.38", weight=5.0)
    removed = memory.add_resonance_trigger(user_id="alice", keyword="850", weight=10.0)
    memory.remove_resonance_trigger(removed, user_id="alice")
    memory.add_negative_attractor(OLD, user_id="alice")
    before = ranked(memory)
    memory.close()

    restarted = reopen()
    after = ranked(restarted)
    assert list(after) == list(before) == [NEW, OLD]
    assert restarted.negative_attractor_count(user_id="alice") == 1
    for content in (OLD, NEW):
        was, now = before[content].components, after[content].components
        assert now.trigger_boost == was.trigger_boost
        assert now.attractor_penalty == was.attractor_penalty
        assert now.similarity == was.similarity

    restarted.clear_negative_attractors(user_id="alice")
    restarted.close()
    again = reopen()
    assert again.negative_attractor_count(user_id="alice") == 0
    assert ranked(again)[OLD].components.attractor_penalty == 0.0
    assert ranked(again)[NEW].components.trigger_boost == pytest.approx(2.5)


# -- 4. caller metadata: source and confidence ---------------------------------------------


def test_meta_confidence_weighs_on_the_score(memory: MemoryClient) -> None:
    text = "The invoice total is 1,247.38 EUR"
    user = memory.store(text, user_id="alice", meta={"source": "user", "confidence": 0.6})
    erp = memory.store(text, user_id="alice", meta={"source": "erp", "confidence": 1.0})
    plain = memory.store(text, user_id="alice")

    results = {r.node.event_id: r for r in memory.retrieve(text, user_id="alice").results}

    assert [r.node.event_id for r in results.values()][-1] == user
    assert results[user].components.source_confidence == pytest.approx(0.6)
    assert results[erp].components.source_confidence == 1.0
    assert results[plain].components.source_confidence == 1.0
    gap = results[erp].score - results[user].score
    assert gap == pytest.approx(0.1 * 0.7 * (1.0 - 0.6), rel=1e-3)  # weight · confidence · Δ
    assert results[erp].node.meta == {"source": "erp", "confidence": 1.0}
    event = memory.get_event(erp, user_id="alice")
    assert event is not None
    assert event.meta["source"] == "erp"
