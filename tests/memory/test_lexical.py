"""The lexical channel: an English-first tokenizer and BM25 postings that grow one
document at a time and score exactly like a batch computation."""

from __future__ import annotations

import random

import pytest

from projections.lexical import LexicalIndex, tokenize
from tests.memory.test_retrieval_index import _bm25


def test_the_tokenizer_folds_case_drops_stop_words_and_punctuation_and_stems() -> None:
    assert tokenize("The NURSE was Running, and she runs!") == ["nurs", "run", "run"]
    assert tokenize("I'm at the café; it's 9 o'clock") == ["caf\u00e9", "clock"]
    assert tokenize("Cars, CARS and car") == ["car", "car", "car"]
    assert tokenize("of the and") == []


def test_postings_grown_one_by_one_score_like_a_batch() -> None:
    rng = random.Random(7)
    words = [
        "coffee",
        "tea",
        "running",
        "runs",
        "garden",
        "gardens",
        "paris",
        "the",
        "of",
        "doctor",
        "doctors",
        "monday",
    ]
    documents = [" ".join(rng.choices(words, k=rng.randint(1, 9))) for _ in range(200)]
    index = LexicalIndex()
    for count, document in enumerate(documents, start=1):
        index.add(document)
        if count in (1, 50, 200):
            seen = [tokenize(d) for d in documents[:count]]
            for query in ("running doctor", "gardens of paris", "tea tea monday"):
                expected = _bm25(seen, tokenize(query))
                assert index.scores(query).tolist() == pytest.approx(expected, rel=1e-12)
    assert len(index) == 200
    assert not index.scores("nothing matches this").any()


def test_an_empty_index_scores_nothing() -> None:
    assert LexicalIndex().scores("coffee").shape == (0,)
