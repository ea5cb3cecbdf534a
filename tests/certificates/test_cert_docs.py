"""The Python examples in docs/certificates.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "certificates.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_doc_has_an_example() -> None:
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS)
def test_example_runs(block: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(block, str(DOC), "exec"), {"__name__": "__docs__"})
    output = capsys.readouterr().out
    assert "verified certificate signed by" in output
    assert "tampered copy refused:" in output
