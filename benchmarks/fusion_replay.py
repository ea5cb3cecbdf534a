"""Which fusion of the dense and lexical channels: one ``bench recall`` run, replayed.

    python benchmarks/fusion_replay.py --embedder wordllama \\
        --dataset ../shared/data/locomo-dev \\
        --scenarios ../shared/data/memory-dev/natural.json \\
        --scenarios benchmarks/scenarios/everyday.json

It runs ``oblivio bench recall`` as the command does (same stores, same questions,
the default ranking) and records what ``rank()`` was given for every question: each
node's cosine, each query term's BM25 part, the admitted rows, the session
neighbours and the query-independent score terms.  Then it ranks every recorded
question again under each fusion of :data:`FUSIONS` (the score's other parts as the
product computes them: :func:`projections.scoring.match`'s context, the totals,
successors) and prints LoCoMo recall@1/5/10, the scenario files' corrections /
stale / controls (``ingest()`` with ``first_person_owner``) and paraphrases found
first / in the top 3.  The replay of the default must equal the run's own first
results (checked).  What a replay cannot show: the likely updates were drawn by
the detector under the default ranking (it ranks too), and stay as drawn.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import projections.retrieval_service as service
from oblivio_bench.recall import KS, RecallBenchConfig, read_dataset, run_recall_bench
from oblivio_bench.scenarios import read_scenarios
from projections import lexical, scoring
from projections.dates import named_period
from projections.retrieval_index import NodeFilter, SubjectIndex, rank
from projections.scoring import ScoringConfig

Record = dict[str, Any]
Fusion = Callable[[Record], np.ndarray[Any, Any]]
CONFIG = ScoringConfig()
RECORDS: list[Record] = []


def record(
    index: SubjectIndex, query: str, vector: Any, now: Any, wanted: NodeFilter, limit: int
) -> Any:
    """rank(), recording its inputs first."""
    with index.lock:
        admitted = index.admitted(wanted)
        count = len(index.nodes)
        RECORDS.append(
            {
                "query": query,
                "limit": limit,
                "contents": [n.content for n in index.nodes],
                "ids": [str(n.id) for n in index.nodes],
                "dense": scoring.cosines(index.vectors, vector),
                "parts": _term_parts(index, query),
                "admitted": admitted.copy(),
                "neighbours": index.neighbours.copy(),
                "asks": index.asks.copy(),
                "terms": index.terms(wanted.as_of or now, np.zeros(count)),
                "successions": index.successions().copy(),
            }
        )
    results = rank(index, query, vector, now, wanted, limit)
    RECORDS[-1]["first"] = results[0].node.content if results else None
    return results


def _term_parts(index: SubjectIndex, query: str) -> list[tuple[float, np.ndarray[Any, Any]]]:
    """(idf, every row's BM25 part) for each distinct query term, a named period as one:
    the parts :meth:`projections.lexical.LexicalIndex.scores` adds up."""
    period = named_period(query)
    words = query if period is None else period.rest
    postings, counts, lengths = index.lexical.postings()
    length = np.asarray(lengths, dtype=np.float64)
    norm = lexical.K1 * (1 - lexical.B + lexical.B * length / (length.mean() or 1.0))
    parts = []
    for term in dict.fromkeys(lexical.tokenize(words)):
        [idf] = index.lexical.idf([term]).values()
        part = np.zeros(len(length))
        rows = np.asarray(postings.get(term, []), dtype=np.intp)
        tf = np.asarray(counts.get(term, []), dtype=np.float64)
        part[rows] = idf * tf * (lexical.K1 + 1) / (tf + norm[rows])
        parts.append((idf, part))
    if period is not None:
        held = index.effective_within(period.start, period.end)
        part, attainable = index.lexical.held_term(held)
        parts.append((attainable / (lexical.K1 + 1), part))
    return parts


# -- fusions: each gives every row its fused value, before the session context ---------------


def _bm25(rec: Record) -> np.ndarray[Any, Any]:
    return sum((part for _, part in rec["parts"]), np.zeros(len(rec["dense"])))


def _share(rec: Record, scale: float = CONFIG.lexical_scale) -> np.ndarray[Any, Any]:
    attainable = sum(idf for idf, _ in rec["parts"]) * (lexical.K1 + 1)
    if attainable <= 0:
        return np.zeros(len(rec["dense"]))
    share: np.ndarray[Any, Any] = np.minimum(_bm25(rec) / (scale * attainable), 1.0)
    return share


def _mix(
    weight: float, dense: np.ndarray[Any, Any], share: np.ndarray[Any, Any]
) -> np.ndarray[Any, Any]:
    mixed: np.ndarray[Any, Any] = (1 - weight) * dense + weight * share
    return mixed


def fixed(weight: float = CONFIG.lexical_weight, power: float = 1.0) -> Fusion:
    """(1 − λ) · cosine + λ · share^power: λ for every query (power 1: the fusion until now)."""
    return lambda rec: _mix(weight, np.maximum(rec["dense"], 0), _share(rec) ** power)


def margin(mu: float, weight: float = CONFIG.lexical_weight) -> Fusion:
    """The product's: λ / (1 + μ · margin) (:func:`projections.scoring.query_lexical_weight`)."""
    config = dataclasses.replace(CONFIG, lexical_weight=weight, dense_margin_weight=mu)

    def fuse(rec: Record) -> np.ndarray[Any, Any]:
        λ = scoring.query_lexical_weight(config, rec["dense"])
        return _mix(λ, np.maximum(rec["dense"], 0), _share(rec))

    return fuse


def standardised(weight: float, width: float) -> Fusion:
    """Score-distribution fusion: the cosine's z-score over the candidates / width, in [0, 1]."""

    def fuse(rec: Record) -> np.ndarray[Any, Any]:
        admitted = rec["dense"][rec["admitted"]]
        z = (rec["dense"] - admitted.mean()) / (admitted.std() or 1.0)
        return _mix(weight, np.clip(z / width, 0, 1), _share(rec))

    return fuse


def reciprocal_rank(k: int) -> Fusion:
    """Reciprocal-rank fusion: 1 / (k + rank) in each channel (none without a shared term)."""

    def fuse(rec: Record) -> np.ndarray[Any, Any]:
        dense, bm25 = rec["dense"], _bm25(rec)
        ranks = [np.empty(len(dense)) for _ in range(2)]
        for placed, values in zip(ranks, (dense, bm25), strict=True):
            placed[np.argsort(-values, kind="stable")] = np.arange(1, len(values) + 1)
        fused = 1 / (k + ranks[0]) + np.where(bm25 > 0, 1 / (k + ranks[1]), 0)
        return (k + 1) * fused / 2

    return fuse


FUSIONS: dict[str, Fusion] = {
    "default: margin, μ = 0.5": margin(0.5),
    "λ for every query (μ = 0, until now)": fixed(),
    "margin, μ = 1": margin(1.0),
    "margin, μ = 0.25": margin(0.25),
    "margin, μ = 0.67, λ = 0.8": margin(1 / 1.5, 0.8),
    "λ = 0.5 for every query": fixed(0.5),
    "share squared (coverage^2), λ = 0.7": fixed(power=2.0),
    "share to the power 1.5": fixed(power=1.5),
    "cosine z-score / 4, λ = 0.7": standardised(0.7, 4.0),
    "cosine z-score / 3, λ = 0.6": standardised(0.6, 3.0),
    "reciprocal ranks, k = 10": reciprocal_rank(10),
    "reciprocal ranks, k = 60": reciprocal_rank(60),
}


# -- replaying --------------------------------------------------------------------------------


def ranked(rec: Record, fusion: Fusion, limit: int) -> list[int]:
    """The rows rank() would return with this fusion, best first."""
    fused = fusion(rec)
    admitted, neighbours = rec["admitted"], rec["neighbours"]
    # scoring.match's context, with the fused values given instead of computed.
    lent = np.append(np.where(admitted, fused, 0.0), 0.0)
    previous, following = neighbours[:, 0], neighbours[:, 1]
    asked = np.append(rec["asks"], False)[previous]
    reply = np.where(asked, CONFIG.reply_context_weight, CONFIG.session_context_weight)
    near = np.maximum(reply * lent[previous], CONFIG.session_context_weight * lent[following])
    beyond = np.append(neighbours, [[-1, -1]], axis=0)
    distant = np.maximum(lent[beyond[previous, 0]], lent[beyond[following, 1]])
    context = np.maximum(near, CONFIG.distant_context_weight * distant)
    own = scoring.totals(CONFIG, dataclasses.replace(rec["terms"], match=fused + context))
    totals = np.where(admitted, scoring.follow_successors(own, rec["successions"]), -np.inf)
    rows = np.flatnonzero(admitted).tolist()
    rows.sort(key=lambda row: (-round(float(totals[row]), 12), rec["ids"][row]))
    return rows[:limit]


def contains(text: str, wanted: Sequence[str]) -> bool:
    return any(w in text.casefold() for w in wanted)


class Replay:
    """The recorded questions in the order the run asked them."""

    def __init__(self, records: list[Record]) -> None:
        self.records, self.at = records, 0

    def next(self, query: str, limit: int) -> Record:
        while not (
            self.records[self.at]["query"] == query and self.records[self.at]["limit"] == limit
        ):
            self.at += 1
        self.at += 1
        return self.records[self.at - 1]


def figures(fusion: Fusion, dataset: Path | None, scenario_files: Sequence[Path]) -> str:
    replay, parts = Replay(RECORDS), []
    if dataset is not None:
        hits, asked = dict.fromkeys(KS, 0), 0
        for conversation in read_dataset(dataset):
            dias = [t.dia_id for t in conversation.turns]
            for question in conversation.questions:
                rec = replay.next(question.text, max(KS))
                got = [dias[row] for row in ranked(rec, fusion, max(KS))]
                asked += 1
                for k in KS:
                    hits[k] += bool(question.evidence.intersection(got[:k]))
        parts.append("LoCoMo " + " / ".join(f"{hits[k] / asked:.3f}" for k in KS))
    for path in scenario_files:
        parts.append(_scenario_figures(replay, fusion, path))
    return "  ".join(parts)


def _scenario_figures(replay: Replay, fusion: Fusion, path: Path) -> str:
    scenarios = read_scenarios(path)
    counts = {"owner": [0, 0, 0]}
    for mode in ("owner", "ingest", "store"):  # the order measure_scenarios asks them in
        for kind, group in (("c", scenarios.corrections), ("k", scenarios.controls)):
            for scenario in group:
                rec = replay.next(scenario.question, 1)
                if mode != "owner":
                    continue
                first = rec["contents"][ranked(rec, fusion, 1)[0]]
                tally = counts["owner"]
                if kind == "k":
                    tally[2] += contains(first, scenario.expect)
                else:
                    tally[0] += contains(first, scenario.expect)
                    tally[1] += bool(scenario.stale) and contains(first, scenario.stale)
    top1 = top3 = 0
    for question, expect in scenarios.paraphrases:
        rec = replay.next(question, 3)
        found = [rec["contents"][row] for row in ranked(rec, fusion, 3)]
        top1 += contains(found[0], expect)
        top3 += any(contains(text, expect) for text in found)
    corrections, stale, kept = counts["owner"]
    return f"{scenarios.name} {corrections}/{stale}/{kept} para {top1}/{top3}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path)
    parser.add_argument("--scenarios", type=Path, action="append", default=[])
    parser.add_argument("--embedder", default="wordllama")
    args = parser.parse_args()
    setattr(service, "rank", record)  # noqa: B010 (every retrieve records its inputs)
    config = RecallBenchConfig(
        dataset=args.dataset, embedder=args.embedder, scenarios=tuple(args.scenarios)
    )
    run_recall_bench(config)
    _check_default_replays_the_run()
    print(
        f"{args.embedder}: LoCoMo recall@1/5/10; per file corrections/stale/controls"
        " (first_person_owner), paraphrases top1/top3"
    )
    for name, fusion in FUSIONS.items():
        print(f"{name:40} {figures(fusion, args.dataset, args.scenarios)}", flush=True)


def _check_default_replays_the_run() -> None:
    """The replay of the default ranking must give the run's own first result."""
    default = margin(CONFIG.dense_margin_weight)
    for rec in RECORDS:
        first = ranked(rec, default, 1)
        if first and rec["contents"][first[0]] != rec["first"]:
            raise SystemExit(f"the replay differs from the run for {rec['query']!r}")


if __name__ == "__main__":
    main()
