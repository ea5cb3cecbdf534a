"""The lexical channel of retrieval: BM25 over one subject's nodes, in memory only.

The index is an inverted list per term (rows and term counts), grown one
document at a time: a new node costs the time to tokenise it, whatever the
subject's size, and nothing is rebuilt.  A query gathers the postings of its
terms and scores every row at once with numpy.  Plaintext terms live only in
process memory, inside the subject's cached retrieval index; nothing here
touches a disk.

Why not a library: bm25s cannot add documents to a built index, and an
in-memory SQLite FTS5 table (``bm25()``) returns the matching rows one by one,
to be mapped back to the index's rows on every query.  Measured on LoCoMo turns
(docs/retrieval.md): a query over 10,000 nodes takes 0.6 ms here against 49 ms
through FTS5 (33 ms against 459 ms at 100,000); FTS5 takes a node faster
(0.05-0.07 ms against 0.2-0.35 ms, most of it the tokenising both need), which
matters less than the query on every turn.  Writing the scoring here was also
the simpler path: about forty lines, exact scores, no second copy of the text.

Scores follow BM25 as Lucene computes it (Robertson's formula with
idf = ln(1 + (N − df + 0.5) / (df + 0.5))), each distinct query term counted
once, with k1 = 1.2 and b = 0.5: memories are short, and a long one is less
often padding than a turn that says more (measured on LoCoMo, docs/retrieval.md).
Tokens are English-first: casefolded runs of two or more letters or digits,
English function words dropped, the rest stemmed with the Snowball English
stemmer (PyStemmer).  A query may also carry a term that no text holds but
the caller knows which rows hold (:meth:`LexicalIndex.held_term`: a period the
question names, held by the memories effective within it); it is scored by
the same formula, with tf = 1.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import numpy as np
import numpy.typing as npt
import Stemmer

K1 = 1.2
B = 0.5

_TOKEN = re.compile(r"\w\w+")

# Common English function words: they occur everywhere, so they would only add noise.
# Words that carry meaning in a memory stay: "own", "no"/"not", "before"/"after",
# "again", "off", "up"/"down", "out", "over"/"under", "more"/"most", "few", "same",
# "other" ("I don't own a car", "the other car", "moved out").
_STOP_WORDS = """
    a about above all am an and any are as at be because been being below between both but
    by can could did do does doing during each for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me my myself
    nor now of on once only or our ours ourselves she should so some such than that the
    their theirs them themselves then there these they this those through to too until very
    was we were what when where which while who whom why will with would you your yours
    yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_WORDS.split())


@lru_cache(maxsize=1)
def _stemmer() -> Stemmer.Stemmer:
    return Stemmer.Stemmer("english")


def tokenize(text: str) -> list[str]:
    """The terms of ``text``: casefolded, stop words dropped, stemmed."""
    words = [w for w in _TOKEN.findall(text.casefold()) if w not in STOP_WORDS]
    stems: list[str] = _stemmer().stemWords(words)
    return stems


class LexicalIndex:
    """BM25 postings of a growing list of documents (rows 0, 1, 2 … in order of ``add``)."""

    def __init__(self) -> None:
        self._rows: dict[str, list[int]] = {}
        self._counts: dict[str, list[int]] = {}
        # Document lengths in a numpy array grown by doubling: a query reads them all.
        self._lengths = np.zeros(16, dtype=np.float64)
        self._size = 0
        self._total_length = 0

    def __len__(self) -> int:
        return self._size

    def add(self, text: str) -> None:
        """Index ``text`` as the next row."""
        row = self._size
        terms = Counter(tokenize(text))
        for term, count in terms.items():
            self._rows.setdefault(term, []).append(row)
            self._counts.setdefault(term, []).append(count)
        length = sum(terms.values())
        if row == len(self._lengths):
            self._lengths = np.concatenate([self._lengths, np.zeros_like(self._lengths)])
        self._lengths[row] = length
        self._size += 1
        self._total_length += length

    def postings(self) -> tuple[dict[str, list[int]], dict[str, list[int]], list[float]]:
        """Each term's rows and term counts, and each row's length: all the index holds
        (for its image, projections.index_image; :meth:`from_postings` takes them back)."""
        return self._rows, self._counts, self._lengths[: self._size].tolist()

    @classmethod
    def from_postings(
        cls, rows: dict[str, list[int]], counts: dict[str, list[int]], lengths: list[float]
    ) -> LexicalIndex:
        """The index whose :meth:`postings` these were."""
        index = cls()
        index._rows, index._counts = rows, counts
        index._lengths = np.asarray(lengths or [0.0], dtype=np.float64)
        index._size = len(lengths)
        index._total_length = int(sum(lengths))
        return index

    def copy(self) -> LexicalIndex:
        """An independent copy (the original may go on growing)."""
        rows, counts, lengths = self.postings()
        return LexicalIndex.from_postings(
            {t: list(r) for t, r in rows.items()}, {t: list(c) for t, c in counts.items()}, lengths
        )

    def attainable(self, query: str) -> float:
        """The BM25 score a memory holding every term of ``query`` could reach at most:
        the sum of idf · (k1 + 1) over its distinct terms (a term no memory holds
        counts with df = 0, so a query the memories only partly answer cannot reach it)."""
        rows = self._size
        return sum(
            _idf(rows, len(self._rows.get(term, ()))) * (K1 + 1)
            for term in dict.fromkeys(tokenize(query))
        )

    def idf(self, terms: Iterable[str]) -> dict[str, float]:
        """Each term's idf over the indexed rows (a term no row holds has df = 0)."""
        return {t: _idf(self._size, len(self._rows.get(t, ()))) for t in terms}

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        """The BM25 score of every row for ``query`` (0 where no term matches)."""
        rows = self._size
        out = np.zeros(rows, dtype=np.float64)
        present = [t for t in dict.fromkeys(tokenize(query)) if t in self._rows]
        if not present:
            return out
        for term in present:
            where = np.asarray(self._rows[term], dtype=np.intp)
            tf = np.asarray(self._counts[term], dtype=np.float64)
            out[where] += _idf(rows, len(where)) * tf * (K1 + 1) / (tf + self._norm(where))
        return out

    def held_term(self, held: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.float64], float]:
        """Every row's BM25 score for one more query term, one that the rows in ``held``
        hold once beside their words (a period their effective time falls in), and
        what that term adds to :meth:`attainable`."""
        where = np.flatnonzero(held)
        idf = _idf(self._size, len(where))
        scores = np.zeros(self._size, dtype=np.float64)
        scores[where] = idf * (K1 + 1) / (1 + self._norm(where))
        return scores, idf * (K1 + 1)

    def _norm(self, where: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        """BM25's length normalisation of the rows ``where``: k1 · (1 − b + b · length /
        average), computed for those rows only (a query touches its terms' postings)."""
        average = self._total_length / self._size if self._total_length else 1.0
        norm: npt.NDArray[np.float64] = K1 * (1 - B + B * self._lengths[where] / average)
        return norm


def _idf(rows: int, df: int) -> float:
    """Lucene's idf of a term that ``df`` of ``rows`` documents hold."""
    return math.log(1 + (rows - df + 0.5) / (df + 0.5))
