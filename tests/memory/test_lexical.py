"""The lexical channel: an English-first tokenizer and BM25 postings that grow one
document at a time and score exactly like a batch computation."""

from __future__ import annotations

import random

import numpy as np
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


def test_a_held_term_scores_like_a_word_those_rows_hold_once() -> None:
    documents = [
        "kiwi smoothie after the long swim",
        "a quiet evening with a book",
        "kiwi jam on toast",
        "the kiwi tree needs pruning again",
        "walked the dog along the river at dawn",
    ]
    index = LexicalIndex()
    for document in documents:
        index.add(document)
    holders = np.array(["kiwi" in d for d in documents])
    scores, attainable = index.held_term(holders)
    assert scores.tolist() == pytest.approx(index.scores("kiwi").tolist(), rel=1e-12)
    assert attainable == pytest.approx(index.attainable("kiwi"), rel=1e-12)
    assert scores[2] > scores[0] > 0  # the longer memory weighs it less, like a word
    nobody = index.held_term(np.zeros(len(documents), dtype=bool))
    assert not nobody[0].any()
    assert nobody[1] == pytest.approx(index.attainable("nowhere"))
