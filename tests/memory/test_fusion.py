"""How the two channels fuse and what a session lends: the scoring functions on
arrays, and the issue-29 cases through the facade."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from oblivio import MemoryClient
from projections import scoring
from projections.lexical import LexicalIndex
from projections.model import ScoredNode
from projections.scoring import ScoringConfig
from tests.memory.conftest import Opener

NONE = -1


def test_bm25_is_measured_against_what_the_query_could_attain() -> None:
    index = LexicalIndex()
    for text in ("My sister Anna lives in Madrid.", "I work as a nurse.", "I like tea."):
        index.add(text)
    # "living" and "lives" share a stem, and nothing matches better: divided by the
    # best candidate's score, that one common word made a perfect lexical match.
    query = "What does my sister do for a living in Spain?"
    bm25 = index.scores(query)
    best = scoring.lexical_share(ScoringConfig(lexical_normalisation="best"), bm25, 0.0)
    assert best.tolist() == [1.0, 0.0, 0.0]
    attainable = index.attainable(query)  # sister, live, spain: "spain" is in no memory
    config = ScoringConfig()
    share = scoring.lexical_share(config, bm25, attainable)
    assert 0 < share[0] < 1
    assert share[0] == pytest.approx(bm25[0] / (config.lexical_scale * attainable))
    # A memory holding every term of the query, and more than once, is a full match.
    index.add("Spain: my sister is living in Spain, my sister lives there")
    full = scoring.lexical_share(config, index.scores(query), index.attainable(query))
    assert full[3] == 1.0
    assert index.attainable("") == 0.0
    assert not scoring.lexical_share(config, np.zeros(3), 0.0).any()


def test_the_lexical_weight_yields_to_a_clear_dense_answer() -> None:
    config = ScoringConfig()
    # The best cosine stands 0.4 above the second; the cosines' spread is 0.2.
    clear = np.array([0.6, 0.2, 0.1, 0.1, 0.0])
    margin = (0.6 - 0.2) / float(clear.std())
    expected = config.lexical_weight / (1 + config.dense_margin_weight * margin)
    assert scoring.query_lexical_weight(config, clear) == pytest.approx(expected)
    assert expected < 0.6 * config.lexical_weight
    assert scoring.query_lexical_weight(config, clear[::-1]) == pytest.approx(expected)
    # Best candidates close together: the dense channel is unsure, λ stays nearly whole.
    unsure = np.array([0.6, 0.59, 0.1, 0.1, 0.0])
    assert scoring.query_lexical_weight(config, unsure) > 0.95 * config.lexical_weight
    tie = np.array([0.6, 0.2, 0.6, 0.1, 0.0])
    assert scoring.query_lexical_weight(config, tie) == config.lexical_weight
    # Nothing to compare (one node, equal cosines), or μ = 0: λ itself.
    assert scoring.query_lexical_weight(config, clear[:1]) == config.lexical_weight
    assert scoring.query_lexical_weight(config, np.full(5, 0.3)) == config.lexical_weight
    off = ScoringConfig(dense_margin_weight=0)
    assert scoring.query_lexical_weight(off, clear) == off.lexical_weight


HOBBIES = [
    "I work as a nurse on the children's ward.",
    "I wake up at six on weekdays.",
    "I cycle to the office after work on Fridays.",
    "We keep bees at the bottom of the garden.",
    "I play the fiddle in a folk band.",
    "I am allergic to shellfish.",
    "My car is a blue Volvo estate.",
    "I read crime novels on the train.",
]


def test_one_shared_common_word_does_not_outrank_the_dense_channels_clear_answer(
    reopen: Opener,
) -> None:
    question = "What insects do we look after?"  # "after" is its one word in a memory
    bees, cycling = HOBBIES[3], HOBBIES[2]
    memory: MemoryClient = reopen()
    for text in HOBBIES:
        memory.store(text, user_id="ida")
    found = {r.node.content: r for r in memory.retrieve(question, user_id="ida").results}
    assert next(iter(found)) == bees
    answer, stray = found[bees].components, found[cycling].components
    assert answer.lexical == 0 < stray.lexical
    assert answer.similarity > stray.similarity
    assert answer.lexical_weight == stray.lexical_weight < ScoringConfig().lexical_weight
    # With λ for every query (μ = 0), the shared word wins, as it did before.
    fixed = reopen(scoring=ScoringConfig(dense_margin_weight=0))
    before = fixed.retrieve(question, user_id="ida", limit=1).results[0]
    assert before.node.content == cycling
    assert before.components.lexical_weight == ScoringConfig().lexical_weight


def _match(config: ScoringConfig, fused_only: list[float], asks: list[bool]) -> np.ndarray:
    """The context each node of one session (in order) gets when only the dense
    channel speaks, with these dense values."""
    n = len(fused_only)
    neighbours = np.array([[i - 1 if i else NONE, i + 1 if i + 1 < n else NONE] for i in range(n)])
    config = ScoringConfig(
        lexical_weight=0.0,
        session_context_weight=config.session_context_weight,
        reply_context_weight=config.reply_context_weight,
        distant_context_weight=config.distant_context_weight,
    )
    dense = np.array(fused_only)
    _, context = scoring.match(
        config, 0.0, dense, np.zeros(n), neighbours, np.array(asks), np.ones(n, dtype=bool)
    )
    return context


def test_a_reply_borrows_more_from_the_question_before_it() -> None:
    config = ScoringConfig()
    # Turn 0 matches the query and asks something; turn 1 answers it.
    context = _match(config, [1.0, 0.0, 0.0, 0.0], [True, False, False, False])
    assert context.tolist() == pytest.approx(
        [0.0, config.reply_context_weight, config.distant_context_weight, 0.0]
    )
    # Without the question mark, turn 1 is a plain neighbour.
    plain = _match(config, [1.0, 0.0, 0.0, 0.0], [False] * 4)
    assert plain[1] == pytest.approx(config.session_context_weight)
    # The turn before a matching one borrows κ, whatever it asked.
    before = _match(config, [0.0, 1.0, 0.0, 0.0], [True] * 4)
    assert before[0] == pytest.approx(config.session_context_weight)
    assert before[3] == pytest.approx(config.distant_context_weight)
    off = ScoringConfig(session_context_weight=0, reply_context_weight=0, distant_context_weight=0)
    assert not _match(off, [1.0, 0.5, 0.2], [True, True, True]).any()


def test_the_reply_to_a_matching_question_comes_back(reopen: Opener) -> None:
    memory: MemoryClient = reopen()
    turns = [
        "Ben: How was the trip to the coast?",
        "Ana: Lovely, thanks.",
        "Ben: Did you try any local dishes while you were there?",
        "Ana: Grilled sardines every single evening!",
        "Ben: My cat knocked the plant over again.",
        "Ana: Cats will be cats.",
    ]
    for turn in turns:
        memory.store(turn, user_id="ana", session_id="s1")
    found = memory.retrieve("What local dishes did Ana try on her trip?", user_id="ana", limit=2)
    contents = [n.content for n in found.nodes]
    assert contents[0] == turns[2]  # the question repeats the words
    assert contents[1] == turns[3]  # and its reply holds the answer
    reply = found.results[1].components
    assert reply.context > 0


def test_a_successor_takes_the_place_of_what_it_replaced(reopen: Opener) -> None:
    memory: MemoryClient = reopen()
    old_text = "My barber is Tony on Mill Road."
    new_text = "I get my hair cut at the salon by the canal now."
    memory.store("I keep a vegetable patch behind the garage.", user_id="sam")
    old_event = memory.store(old_text, user_id="sam")
    new_event = memory.store(new_text, user_id="sam")
    [old] = memory.get_event_nodes(old_event, user_id="sam")
    [new] = memory.get_event_nodes(new_event, user_id="sam")
    question = "Which barber on Mill Road do I go to?"
    before = memory.retrieve(question, user_id="sam", include_superseded=True).results
    assert before[0].node.content == old_text  # it repeats the question's words

    memory.supersede(old.id, new.id, evidence_id=new_event, user_id="sam")
    found = memory.retrieve(question, user_id="sam", include_superseded=True).results
    assert [r.node.content for r in found[:2]] == [new_text, old_text]  # old right below
    assert found[0].components.succession > 0
    assert found[0].score == pytest.approx(found[1].score, abs=1e-6)
    assert found[1].components.succession == 0
    # By default the retired memory is not returned; its successor ranks where it did.
    default = memory.retrieve(question, user_id="sam").results
    assert default[0].node.content == new_text


def test_a_note_whose_claims_were_replaced_ranks_below_the_replacement(reopen: Opener) -> None:
    memory: MemoryClient = reopen()
    old = memory.ingest(
        "I keep my notes in Evernote.",
        user_id="kim",
        first_person_owner=True,
        wait_for_extraction=True,
    )
    memory.ingest(
        "I switched from Evernote to Obsidian.",
        user_id="kim",
        first_person_owner=True,
        wait_for_extraction=True,
    )
    assert old.claim_node_ids == ()  # "keep … in" is no rule: the note has no claim
    memory.ingest(
        "I use Evernote for notes.",
        user_id="lee",
        first_person_owner=True,
        wait_for_extraction=True,
    )
    memory.ingest(
        "I switched from Evernote to Obsidian.",
        user_id="lee",
        first_person_owner=True,
        wait_for_extraction=True,
    )
    found = memory.retrieve("Do I use Evernote for notes?", user_id="lee").results
    contents = [r.node.content for r in found]
    # The old note's one claim was retired: the claim that replaced it comes first,
    # the old note right below it.
    assert contents[:2] == [
        "I switched from Evernote to Obsidian",
        "I use Evernote for notes.",
    ]
    assert found[0].components.succession > 0
    # Without a retired claim, the likely update (a switch away from what the note
    # names) still puts the switch where the note would rank, the note right below.
    kept = memory.retrieve("Where do I keep my notes?", user_id="kim").results
    assert [r.node.content for r in kept[:2]] == [
        "I switched from Evernote to Obsidian.",
        "I keep my notes in Evernote.",
    ]


def test_a_question_naming_a_day_or_month_finds_what_was_said_then(reopen: Opener) -> None:
    memory: MemoryClient = reopen()
    said = {
        "I cooked a lentil soup for the neighbours.": datetime(2023, 5, 9, 18, tzinfo=UTC),
        "I cooked a mushroom risotto for the neighbours.": datetime(2023, 6, 2, 19, tzinfo=UTC),
        "The neighbours lent me their ladder.": datetime(2023, 5, 9, 9, tzinfo=UTC),
    }
    for text, moment in said.items():
        memory.store(text, user_id="noor", occurred_at=moment)
    soup, risotto, _ = said

    def first(question: str) -> ScoredNode:
        return memory.retrieve(question, user_id="noor", limit=1).results[0]

    assert first("What did I cook for the neighbours on 9 May 2023?").node.content == soup
    assert first("What did I cook for the neighbours in June 2023?").node.content == risotto
    # The day counts as one term of the question, held by what was said that day.
    undated = memory.retrieve("What did I cook for the neighbours?", user_id="noor").results
    dated = memory.retrieve("What did I cook for the neighbours on 2 June 2023?", user_id="noor")
    lexical = {r.node.content: r.components.lexical for r in dated.results}
    assert lexical[risotto] > lexical[soup] > 0
    assert len({r.components.lexical for r in undated if "cooked" in r.node.content}) == 1
