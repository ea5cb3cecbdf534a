"""``oblivio bench recall``: how often ``retrieve()`` finds the evidence of a question.

The dataset is LoCoMo-shaped JSON (Maharana et al., ACL 2024): one file per
conversation, with ``session_N`` lists of turns (``speaker``, ``dia_id``,
``text``) and ``qa`` items (``question``, ``evidence`` as dia ids,
``category``).  Every turn is stored, in order, as one memory of that
conversation's user, content ``"Speaker: text"`` and ``session_id`` its
session; image captions are not stored.  Each question of categories 1-4
(multi-hop, temporal, open-domain, single-hop) is then asked with
``retrieve()``; it is a hit at k when any of its evidence turns is among the
top k.

Two anchors score the same turns in the same run: plain BM25 (``bm25s`` with
its defaults, English stop words, no stemming) and plain cosine with the
embedder under test.
"""

from __future__ import annotations

import json
import re
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from oblivio.client import MemoryClient
from oblivio.memory.queries import wait_for_vectors
from oblivio_bench.figures import Figure, FigureReport, Section, at_least, percentile
from oblivio_bench.loading import open_client, scratch_settings
from oblivio_bench.report import machine_info
from oblivio_bench.scenarios import measure_scenarios, read_scenarios
from oblivio_bench.systems import BenchError
from projections.embedders import Embedder, EmbedderOptions, resolve_embedder
from projections.scoring import ScoringConfig

Progress = Callable[[str], None]

KS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
TARGET_RECALL_AT_5 = 0.60
TARGET_RATIO_TO_BM25S = 1.2
#: How long a conversation waits for the vector worker after its last store: a slower
#: embedder than the default (``minilm``) may take longer than a caller's usual 10 s to
#: embed a conversation's turns, and its recall is what is measured, not that wait.
CATCH_UP_SECONDS = 900.0
_SESSION = re.compile(r"session_(\d+)")


@dataclass(frozen=True)
class RecallBenchConfig:
    #: A directory of LoCoMo conversations (``None``: scenario files only).
    dataset: Path | None
    embedder: str = "wordllama"
    backend: str = "sqlite"
    server_url: str = ""
    #: The ranking to measure (``None``: the defaults), e.g. to compare fusion weights.
    scoring: ScoringConfig | None = None
    #: How the embedder is reached (``openai:MODEL``: the endpoint and key of the settings).
    embedder_options: EmbedderOptions = field(default_factory=EmbedderOptions)
    #: Plain-speech scenario files (see :mod:`oblivio_bench.scenarios`), measured after LoCoMo.
    scenarios: tuple[Path, ...] = ()


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: str
    content: str
    #: The session's date (``session_N_date_time``), the turn's effective time.
    occurred_at: datetime | None = None


@dataclass(frozen=True)
class Question:
    text: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True)
class Conversation:
    name: str
    turns: Sequence[Turn]
    questions: Sequence[Question]


def read_conversation(path: Path) -> Conversation:
    """One LoCoMo file (the published shape, or its ``conversation`` object unwrapped)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        dialogue = data.get("conversation", data)
        sessions = sorted(
            (int(m.group(1)), key)
            for key in dialogue
            if (m := _SESSION.fullmatch(key)) and isinstance(dialogue[key], list)
        )
        turns = [
            Turn(
                t["dia_id"],
                key,
                f"{t['speaker']}: {t['text']}",
                session_date(dialogue.get(f"{key}_date_time")),
            )
            for _, key in sessions
            for t in dialogue[key]
        ]
        questions = [
            Question(q["question"], frozenset(q.get("evidence") or ()), int(q["category"]))
            for q in data["qa"]
            if int(q["category"]) in CATEGORIES
        ]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BenchError(f"{path} is not a LoCoMo conversation: {exc}") from exc
    return Conversation(path.stem, turns, questions)


def session_date(text: object) -> datetime | None:
    """A LoCoMo session's date (such as "3:05 pm on 2 March, 2024"), taken as UTC; ``None``
    when absent or in another shape."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def read_dataset(directory: Path) -> list[Conversation]:
    files = sorted(directory.glob("*.json"))
    if not files:
        raise BenchError(f"no LoCoMo .json files in {directory}")
    return [read_conversation(f) for f in files]


@dataclass
class Tally:
    """Hits at every k, overall and per category, for one method."""

    hits: dict[tuple[int, int], int] = field(default_factory=dict)
    asked: dict[int, int] = field(default_factory=dict)

    def count(self, question: Question, ranked: Sequence[str]) -> None:
        self.asked[question.category] = self.asked.get(question.category, 0) + 1
        for k in KS:
            hit = bool(question.evidence.intersection(ranked[:k]))
            key = (question.category, k)
            self.hits[key] = self.hits.get(key, 0) + hit

    def recall(self, k: int, category: int | None = None) -> float:
        cats = list(self.asked) if category is None else [category]
        asked = sum(self.asked.get(c, 0) for c in cats)
        return sum(self.hits.get((c, k), 0) for c in cats) / asked if asked else 0.0


@dataclass
class RecallRun:
    tallies: dict[str, Tally] = field(default_factory=dict)
    store_seconds: float = 0.0
    stored: int = 0
    #: From each conversation's first store until its vectors are caught up.
    caught_up_seconds: float = 0.0
    #: The anchor's embed() calls: every turn and question, in one call each.
    embed_seconds: float = 0.0
    embedded: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    scenario_sections: list[Section] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def tally(self, method: str) -> Tally:
        return self.tallies.setdefault(method, Tally())


def run_recall_bench(
    config: RecallBenchConfig, progress: Progress = lambda _: None
) -> FigureReport:
    if config.dataset is None and not config.scenarios:
        raise BenchError("give a LoCoMo directory, a scenario file, or both")
    conversations = read_dataset(config.dataset) if config.dataset is not None else []
    scenario_files = [read_scenarios(path) for path in config.scenarios]
    embedder = resolve_embedder(config.embedder, config.embedder_options)
    run = RecallRun()
    with (
        scratch_settings(config.backend, config.server_url, ["recall"]) as settings,
        open_client(settings["recall"], embedder, config.scoring) as client,
    ):
        client.context.consistency_timeout = CATCH_UP_SECONDS
        for conversation in conversations:
            progress(f"{conversation.name}: {len(conversation.turns)} turns")
            _measure(client, embedder, conversation, run)
        for scenarios in scenario_files:
            sections, details = measure_scenarios(client, scenarios, progress)
            run.scenario_sections += sections
            run.details.update(details)
    return _report(config, embedder, conversations, run)


def _measure(
    client: MemoryClient, embedder: Embedder, conversation: Conversation, run: RecallRun
) -> None:
    user = f"locomo-{conversation.name}"
    dia_of: dict[uuid.UUID, str] = {}
    started = time.perf_counter()
    for turn in conversation.turns:
        event_id = client.store(
            turn.content, user_id=user, session_id=turn.session, occurred_at=turn.occurred_at
        )
        dia_of[event_id] = turn.dia_id
    run.store_seconds += time.perf_counter() - started
    run.stored += len(conversation.turns)
    # The vectors first: the likely-update follower, which a consistent retrieve also
    # waits for, gives the vector state only 10 s, and a slower embedder lags more.
    wait_for_vectors(client.context, user)
    run.caught_up_seconds += time.perf_counter() - started
    client.retrieve("warm-up", user_id=user)  # loads the index
    for question in conversation.questions:
        started = time.perf_counter()
        found = client.retrieve(question.text, user_id=user, limit=max(KS))
        run.latencies_ms.append((time.perf_counter() - started) * 1000)
        run.tally("oblivio").count(question, [dia_of[n.event_id] for n in found.nodes])
    ids = [t.dia_id for t in conversation.turns]
    texts = [t.content for t in conversation.turns]
    questions = [q.text for q in conversation.questions]
    for method, scores in (
        ("bm25s", _bm25s_scores(texts, questions)),
        ("cosine", _cosine_scores(embedder, texts, questions, run)),
    ):
        for question, row in zip(conversation.questions, scores, strict=True):
            top = np.argsort(-row, kind="stable")[: max(KS)]
            run.tally(method).count(question, [ids[i] for i in top])


def _bm25s_scores(texts: list[str], questions: list[str]) -> np.ndarray[Any, Any]:
    """Plain BM25 as bm25s computes it by default: English stop words, no stemming."""
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
    tokens = bm25s.tokenize(questions, stopwords="en", show_progress=False)
    docs, scores = retriever.retrieve(tokens, k=len(texts), show_progress=False)
    full = np.zeros((len(questions), len(texts)))
    for i in range(len(questions)):
        full[i, docs[i]] = scores[i]
    return full


def _cosine_scores(
    embedder: Embedder, texts: list[str], questions: list[str], run: RecallRun
) -> np.ndarray[Any, Any]:
    started = time.perf_counter()
    documents = np.asarray(embedder.embed(texts), dtype=np.float64)
    queries = np.asarray(embedder.embed(questions), dtype=np.float64)
    run.embed_seconds += time.perf_counter() - started
    run.embedded += len(texts) + len(questions)
    result: np.ndarray[Any, Any] = queries @ documents.T
    return result


def _report(
    config: RecallBenchConfig,
    embedder: Embedder,
    conversations: Sequence[Conversation],
    run: RecallRun,
) -> FigureReport:
    ours = run.tally("oblivio")
    sections = _locomo_sections(run) if conversations else []
    sections += run.scenario_sections
    return FigureReport(
        benchmark="oblivio bench recall",
        backend=config.backend,
        rounds=1,
        scale=1.0,
        machine=machine_info(None),
        parameters={
            "dataset": str(config.dataset) if config.dataset is not None else None,
            "scenarios": [str(path) for path in config.scenarios],
            "embedder": embedder.name,
            "scoring": vars(config.scoring or ScoringConfig()),
            "conversations": len(conversations),
            "turns": run.stored,
            "questions": sum(ours.asked.values()),
            "query_median_ms": statistics.median(run.latencies_ms) if run.latencies_ms else 0.0,
        },
        sections=sections,
        details=run.details,
    )


def _locomo_sections(run: RecallRun) -> list[Section]:
    ours, anchor = run.tally("oblivio"), run.tally("bm25s")
    sections = []
    for method, tally in run.tallies.items():
        target = {5: at_least(TARGET_RECALL_AT_5)} if method == "oblivio" else {}
        figures = [
            Figure(
                f"{method}.recall@{k}", f"recall@{k}", tally.recall(k), "fraction", target.get(k)
            )
            for k in KS
        ]
        figures += [
            Figure(f"{method}.{name}.recall@5", f"recall@5, {name}", tally.recall(5, c), "fraction")
            for c, name in CATEGORIES.items()
        ]
        sections.append(Section(_TITLES[method], figures))
    baseline = anchor.recall(5)
    sections.append(
        Section(
            "retrieve() against the anchor, and speed",
            [
                Figure(
                    "ratio_to_bm25s@5",
                    "recall@5 / bm25s recall@5",
                    ours.recall(5) / baseline if baseline else 0.0,
                    "×",
                    at_least(TARGET_RATIO_TO_BM25S),
                ),
                Figure("query_p50_ms", "retrieve() p50", percentile(run.latencies_ms, 50), "ms"),
                Figure("query_p99_ms", "retrieve() p99", percentile(run.latencies_ms, 99), "ms"),
                Figure(
                    "store_per_s",
                    "store() throughput",
                    run.stored / run.store_seconds if run.store_seconds else 0.0,
                    "memories/s",
                ),
                Figure(
                    "caught_up_per_s",
                    "stored and embedded (first store to vectors caught up)",
                    run.stored / run.caught_up_seconds if run.caught_up_seconds else 0.0,
                    "memories/s",
                ),
                Figure(
                    "embed_ms",
                    "embed(), turns and questions",
                    run.embed_seconds * 1000 / run.embedded if run.embedded else 0.0,
                    "ms/text",
                ),
            ],
        )
    )
    return sections


_TITLES = {
    "oblivio": "retrieve() (hybrid ranking)",
    "bm25s": "anchor: plain BM25 (bm25s, English stop words, no stemming)",
    "cosine": "anchor: plain cosine with the same embedder",
}
