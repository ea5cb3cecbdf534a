"""``oblivio bench recall --scenarios`` on a tiny scenario file the test writes itself."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from oblivio.cli import main

SCENARIOS = {
    "filler": ["I keep my bike in the hallway.", "My favourite fruit is the plum."],
    "corrections": [
        {
            "id": "c1",
            "old": "I keep bees in the back garden.",
            "new": "I moved my beehives to the allotment on Ash Lane.",
            "q": "Where are my beehives?",
            "expect": ["ash lane"],
            "stale": ["back garden"],
        },
        {
            "id": "c2",
            "old": "My locker number is 41.",
            "new": "They gave me locker 57 after the refit.",
            "q": "What is my locker number?",
            "expect": ["57"],
            "stale": ["41"],
        },
    ],
    "controls": [
        {
            "id": "k1",
            "old": "My piano teacher is Mrs Okoro.",
            "new": "My nephew found a new guitar teacher last week.",
            "q": "Who is my piano teacher?",
            "expect": ["okoro"],
        }
    ],
    "paraphrase": {
        "facts": ["I mend clocks for a living.", "My grandmother Vera lives in Riga."],
        "questions": [
            {"q": "Where does my grandmother Vera live?", "expect": ["riga"]},
            {"q": "Which clocks do I mend?", "expect": ["clocks"]},
        ],
    },
}


def test_bench_recall_runs_scenario_files(tmp_path: Path) -> None:
    scenarios = tmp_path / "tiny.json"
    scenarios.write_text(json.dumps(SCENARIOS))
    out = tmp_path / "scenarios.json"
    result = CliRunner().invoke(
        main,
        [
            "bench",
            "recall",
            "--scenarios",
            str(scenarios),
            "--embedder",
            "hashing",
            "--json",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    figures = {key: f["value"] for key, f in report["figures"].items()}
    for mode in ("owner", "ingest", "store"):
        key = f"scenarios.tiny.{mode}"
        first = report["details"][key]  # the first result of every scenario
        assert set(first) == {"c1", "c2", "k1"}
        assert "ash lane" in first["c1"].casefold()  # only the new message names beehives
        assert "okoro" in first["k1"].casefold()  # a nephew's teacher changes nothing
        passed = sum(
            expected in first[c["id"]].casefold()
            for c in SCENARIOS["corrections"]
            for expected in c["expect"]
        )
        stale = sum(
            stale in first[c["id"]].casefold()
            for c in SCENARIOS["corrections"]
            for stale in c["stale"]
        )
        assert figures[f"{key}.corrections_first"] == passed
        assert figures[f"{key}.stale_first"] == stale
        assert figures[f"{key}.controls_kept"] == 1
    # Judged against the shares only where the protocol says so (first_person_owner).
    assert report["figures"]["scenarios.tiny.owner.controls_kept"]["target"] == "≥ 1"
    assert report["figures"]["scenarios.tiny.store.controls_kept"]["target"] is None
    assert figures["scenarios.tiny.paraphrase.top3"] == 2
    assert figures["scenarios.tiny.paraphrase.top1"] == 2
    assert "corrections: new fact first (of 2)" in result.output


def test_bench_recall_refuses_a_file_that_is_not_scenarios(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"filler": [], "corrections": [{"id": "c1"}]}))
    result = CliRunner().invoke(main, ["bench", "recall", "--scenarios", str(broken)])
    assert result.exit_code != 0
    assert "is not a scenario file" in result.output


def test_bench_recall_needs_something_to_measure() -> None:
    result = CliRunner().invoke(main, ["bench", "recall"])
    assert result.exit_code != 0
    assert "a LoCoMo directory, a scenario file, or both" in result.output
