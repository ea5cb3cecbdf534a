"""``oblivio bench recall`` on a tiny LoCoMo-shaped conversation the test writes itself."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from oblivio.cli import main

# ``endpoint``: a small server speaking /v1/embeddings (a fixture, used by name).
from tests.memory.test_openai_embedder import KEY, MODEL, Endpoint, endpoint  # noqa: F401

SESSION_1 = [
    ("Ana", "D1:1", "Good morning! I just got back from my trip to Lisbon."),
    ("Ben", "D1:2", "Welcome back! How was the weather there?"),
    ("Ana", "D1:3", "Sunny all week, and I finally learned to surf."),
    ("Ben", "D1:4", "My cat Pixel knocked over the plant again today."),
]
SESSION_2 = [
    ("Ana", "D2:1", "I adopted a beagle puppy called Rocket on Sunday."),
    ("Ben", "D2:2", "Congratulations! I started violin lessons this month."),
    ("Ana", "D2:3", "My sister Clara is moving to Oslo for a new job."),
]
QA = [
    {"question": "Where did Ana travel?", "answer": "Lisbon", "evidence": ["D1:1"], "category": 4},
    {
        "question": "What is the name of Ben's cat?",
        "answer": "Pixel",
        "evidence": ["D1:4"],
        "category": 4,
    },
    {
        "question": "Which instrument does Ben play?",
        "answer": "violin",
        "evidence": ["D2:2"],
        "category": 1,
    },
    {
        "question": "When did Ana adopt Rocket?",
        "answer": "Sunday",
        "evidence": ["D2:1"],
        "category": 2,
    },
    {"question": "Where is Clara moving?", "answer": "Oslo", "evidence": ["D2:3"], "category": 3},
    # Category 5 (adversarial) is not asked.
    {
        "question": "What did Ana say about Clara's surfing?",
        "adversarial_answer": "x",
        "evidence": ["D1:3"],
        "category": 5,
    },
]


def _turns(turns: list[tuple[str, str, str]]) -> list[dict[str, str]]:
    return [{"speaker": s, "dia_id": d, "text": t} for s, d, t in turns]


def write_dataset(directory: Path) -> Path:
    directory.mkdir()
    conversation = {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 3 March, 2021",
        "session_1": _turns(SESSION_1),
        "session_2_date_time": "2:00 pm on 17 March, 2021",
        "session_2": [
            *_turns(SESSION_2[:1]),
            # An image turn: its caption is not stored.
            {**_turns(SESSION_2[1:2])[0], "blip_caption": "a photo of a violin"},
            *_turns(SESSION_2[2:]),
        ],
    }
    (directory / "tiny.json").write_text(json.dumps({"conversation": conversation, "qa": QA}))
    return directory


def test_bench_recall_reports_every_figure(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "locomo")
    out = tmp_path / "recall.json"
    result = CliRunner().invoke(
        main,
        ["bench", "recall", "--dataset", str(dataset), "--embedder", "hashing", "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    figures = {key: f["value"] for key, f in report["figures"].items()}
    assert report["parameters"]["turns"] == 7
    assert report["parameters"]["questions"] == 5  # category 5 left out
    for method in ("oblivio", "bm25s", "cosine"):
        values = [figures[f"{method}.recall@{k}"] for k in (1, 5, 10)]
        assert values == sorted(values)
        assert values[-1] == 1.0  # 7 turns: every evidence turn is in the top 10
    # Most questions repeat a rare word of their evidence turn.
    assert figures["oblivio.recall@5"] == 1.0
    assert figures["bm25s.recall@1"] >= 0.6
    assert figures["oblivio.single-hop.recall@5"] == 1.0
    assert figures["query_p99_ms"] >= figures["query_p50_ms"] > 0
    assert figures["store_per_s"] >= figures["caught_up_per_s"] > 0
    assert figures["embed_ms"] > 0
    assert "recall@5 / bm25s recall@5" in result.output


def test_bench_recall_refuses_a_directory_without_conversations(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bench", "recall", "--dataset", str(tmp_path)])
    assert result.exit_code != 0
    assert "no LoCoMo .json files" in result.output


def test_bench_recall_reaches_the_configured_endpoint_with_its_key(
    tmp_path: Path,
    endpoint: Endpoint,  # noqa: F811  (the fixture imported above)
) -> None:
    """``--embedder openai:MODEL`` goes to ``OBLIVIO_OPENAI_BASE_URL`` with
    ``OBLIVIO_OPENAI_API_KEY``, as the server would (it went to OpenAI's own)."""
    dataset = write_dataset(tmp_path / "locomo")
    environment = {"OBLIVIO_OPENAI_BASE_URL": endpoint.url, "OBLIVIO_OPENAI_API_KEY": KEY}
    result = CliRunner().invoke(
        main,
        ["bench", "recall", "--dataset", str(dataset), "--embedder", f"openai:{MODEL}"],
        env=environment,
    )
    assert result.exit_code == 0, result.output
    embedded = {text for request in endpoint.requests for text in request["input"]}
    assert "Ana: Sunny all week, and I finally learned to surf." in embedded
    assert "Where is Clara moving?" in embedded


def test_bench_recall_with_no_endpoint_configured_goes_nowhere(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "locomo")
    result = CliRunner().invoke(
        main,
        ["bench", "recall", "--dataset", str(dataset), "--embedder", f"openai:{MODEL}"],
        env={"OBLIVIO_OPENAI_BASE_URL": None},
    )
    assert result.exit_code != 0
    assert "OBLIVIO_OPENAI_BASE_URL" in result.output
