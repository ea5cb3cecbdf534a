"""Questions that share no word with the memory they ask about: the default
embedder (wordllama) finds them, the lexical hashing embedder does not.

The pairs are the project's own; no query repeats a content word of its
memory, so the lexical channel has nothing to go on and the dense channel
decides (the speaker names are shared by every memory alike)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections.embedders import resolve_embedder

PAIRS = [
    ("I work as a nurse at the city hospital.", "What is my profession?"),
    ("I drive a red Toyota to the office.", "Which vehicle do I own?"),
    ("On flights I always ask for a spot by the window.", "Where do I like to sit on planes?"),
    ("My daughter Mia turns seven in June.", "How old is my child?"),
    ("I am allergic to peanuts.", "Which food makes me ill?"),
    ("We adopted a golden retriever puppy last spring.", "What kind of dog do we have?"),
    (
        "My favourite drink in the morning is an espresso.",
        "What beverage do I prefer at breakfast?",
    ),
    ("I play the cello in a small orchestra.", "Which musical instrument can I play?"),
    ("Our apartment is in Lisbon, close to the river.", "In which city do I live?"),
    ("I go jogging every Saturday before sunrise.", "What exercise do I do at the weekend?"),
    ("My brother Tom studies chemistry in Utrecht.", "What subject is my sibling learning?"),
    (
        "For dinner I usually cook pasta with tomatoes.",
        "What meal do I often prepare in the evening?",
    ),
]
#: Share of questions whose memory must come first with the default embedder.
EXPECTED_TOP1 = 0.6


def top1_recall(settings: Settings, embedder: str) -> float:
    with MemoryClient(settings=settings, embedder=resolve_embedder(embedder)) as memory:
        for content, _ in PAIRS:
            memory.store(content, user_id="alice")
        hits = 0
        for content, question in PAIRS:
            found = memory.retrieve(question, user_id="alice", limit=1)
            hits += found.nodes[0].content == content
    return hits / len(PAIRS)


@pytest.mark.parametrize(("embedder", "finds"), [("wordllama", True), ("hashing", False)])
def test_paraphrases_are_found_by_the_semantic_embedder_only(
    tmp_path: Path, embedder: str, finds: bool
) -> None:
    recall = top1_recall(Settings(data_dir=tmp_path / embedder), embedder)
    assert (recall >= EXPECTED_TOP1) is finds, recall
