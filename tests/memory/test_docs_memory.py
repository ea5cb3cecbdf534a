"""The Python examples of docs/memory.md and docs/retrieval.md run as written.

Like the documentation test of the whole suite: each file's ```python blocks
run in order in one namespace, in an empty working directory, so examples may
build on earlier ones and create stores in relative directories.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
FILES = ["memory.md", "retrieval.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
# Settings that would point the examples elsewhere than their working directory.
ENVIRONMENT = [
    "OBLIVIO_DATABASE_URL",
    "OBLIVIO_DATA_DIR",
    "OBLIVIO_KEYRING",
    "OBLIVIO_KEKS",
    "OBLIVIO_SUBJECT_HMAC_KEY",
    "OBLIVIO_NAMESPACE",
]


def python_blocks(path: Path) -> list[tuple[int, str]]:
    """Each python block with the line its code starts on."""
    text = path.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in BLOCK.finditer(text)]


@pytest.mark.parametrize("name", FILES)
def test_doc_examples_run_in_order(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ENVIRONMENT:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.chdir(tmp_path)
    path = DOCS / name
    blocks = python_blocks(path)
    assert len(blocks) >= 3, f"{name} should show its operations"
    namespace: dict[str, object] = {"__name__": f"docs_{path.stem}"}
    for line, code in blocks:
        # Pad so that tracebacks point at the line in the Markdown file.
        exec(compile("\n" * (line - 1) + code, str(path), "exec"), namespace)
