"""The Python examples in docs/erasure.md run as written: each on its own in a fresh
directory, and all of them one after another in the same directory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "erasure.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def run(block: str) -> None:
    exec(compile(block, str(DOC), "exec"), {"__name__": "__docs__"})


def test_doc_has_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_example_runs_on_its_own(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run(BLOCKS[index])
    assert (tmp_path / "memory").is_dir()


def test_examples_run_in_sequence_in_one_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for block in BLOCKS:
        run(block)
    output = capsys.readouterr().out
    assert "refused: bad_signature" in output
    assert "edited export refused:" in output
    assert "expired memories erased: 1" in output
