"""The docs run: every Python example in README.md and docs/ is executed as written.

Each fenced ``python`` block becomes one test, named ``<file>:<n>``.  The blocks of
one file run in order in one namespace (a later block may use names an earlier one
defined) inside a temporary working directory of that file.  A block whose fence is
directly preceded by the line ``<!-- not-run -->`` is skipped (examples that need a
server).  New files under docs/ are picked up without touching this module.

Beside the examples: the README opens with the command that runs oblivio and the one
that tests it, CI runs that test command verbatim, and every CLI command is
documented somewhere as ``oblivio <command>``.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CI_SCRIPT = ROOT / ".ci" / "run"
NOT_RUN = "<!-- not-run -->"
PYTHON = frozenset({"python", "py"})
_OPENING_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


@dataclass(frozen=True)
class Block:
    """One fenced code block of a Markdown file."""

    lang: str
    code: str
    line: int  # line number (1-based) of the block's first code line
    runs: bool = True

    @property
    def is_python(self) -> bool:
        return self.lang in PYTHON


def fenced_blocks(markdown: str) -> list[Block]:
    """Every fenced block, in order; fences nested in other fences are content."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _OPENING_FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        end = index + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        body = [
            line[indent:] if line[:indent].isspace() else line for line in lines[index + 1 : end]
        ]
        info = opening["info"].split()
        runs = index == 0 or lines[index - 1].strip() != NOT_RUN
        blocks.append(Block(info[0] if info else "", "\n".join(body) + "\n", index + 2, runs))
        index = end + 1
    return blocks


def _closes(line: str, fence: str) -> bool:
    char = re.escape(fence[0])
    return re.fullmatch(rf" {{0,3}}{char}{{{len(fence)},}}[ \t]*", line) is not None


def doc_files() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


def name_of(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def python_blocks(path: Path) -> list[Block]:
    return [b for b in fenced_blocks(path.read_text(encoding="utf-8")) if b.is_python]


def _example_params() -> list[Any]:
    params = []
    for path in doc_files():
        for number, block in enumerate(python_blocks(path), start=1):
            marks = [] if block.runs else [pytest.mark.skip(reason=f"marked {NOT_RUN}")]
            params.append(pytest.param(path, number, id=f"{name_of(path)}:{number}", marks=marks))
    return params


# -- running the examples ------------------------------------------------------------


@dataclass
class DocRun:
    """The examples of one file, run in order in one namespace and one directory."""

    path: Path
    workdir: Path
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__main__"})
    done: int = 0  # blocks run (or skipped) so far, in file order
    failed: int | None = None  # number of the first block that raised

    def run_through(self, number: int) -> None:
        """Run the blocks before ``number`` not run yet (if selected alone), then it."""
        blocks = python_blocks(self.path)
        while self.done < number:
            self.done += 1
            if self.failed is not None:
                pytest.skip(f"{name_of(self.path)}:{self.failed} failed; later blocks need it")
            self._run(self.done, blocks[self.done - 1])

    def _run(self, number: int, block: Block) -> None:
        if not block.runs:
            return
        # Pad with blank lines so tracebacks name the Markdown file's own line numbers.
        source = "\n" * (block.line - 1) + block.code
        try:
            exec(compile(source, str(self.path), "exec"), self.namespace)
        except BaseException:
            self.failed = number
            raise


@pytest.fixture(scope="module")
def doc_runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], DocRun]:
    runs: dict[Path, DocRun] = {}

    def run_of(path: Path) -> DocRun:
        if path not in runs:
            workdir = tmp_path_factory.mktemp(re.sub(r"\W", "_", name_of(path)))
            (workdir / "tmp").mkdir()
            runs[path] = DocRun(path, workdir)
        return runs[path]

    return run_of


@pytest.mark.parametrize(("path", "number"), _example_params())
def test_doc_example_runs(
    path: Path, number: int, doc_runs: Callable[[Path], DocRun], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = doc_runs(path)
    monkeypatch.chdir(run.workdir)
    # Examples that ask tempfile for a directory get one inside the working directory.
    monkeypatch.setattr(tempfile, "tempdir", str(run.workdir / "tmp"))
    run.run_through(number)


def test_the_readme_has_python_examples() -> None:
    assert any(b.runs for b in python_blocks(README))


def test_block_parser_finds_python_blocks_and_honours_not_run() -> None:
    markdown = "\n".join(
        [
            "# Title",
            "```python",
            "a = 1",
            "```",
            "",
            NOT_RUN,
            "```python",
            "serve_forever()",
            "```",
            "````markdown",
            "```python",
            "not_a_block()",
            "```",
            "````",
            "- a list item:",
            "  ```py",
            "  b = a + 1",
            "  ```",
            "```sh",
            "oblivio demo",
            "```",
        ]
    )
    blocks = fenced_blocks(markdown)
    assert [(b.lang, b.code, b.line, b.runs) for b in blocks] == [
        ("python", "a = 1\n", 3, True),
        ("python", "serve_forever()\n", 8, False),
        ("markdown", "```python\nnot_a_block()\n```\n", 11, True),
        ("py", "b = a + 1\n", 17, True),
        ("sh", "oblivio demo\n", 20, True),
    ]


def test_blocks_of_one_file_share_a_namespace_in_order(tmp_path: Path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text("```python\nx = 2\n```\n\n```python\nassert x * 21 == 42\n```\n")
    run = DocRun(doc, tmp_path)
    run.run_through(2)
    assert (run.done, run.namespace["x"]) == (2, 2)


# -- the README's commands and the CLI ------------------------------------------------


def _heading_lines(markdown: str) -> list[int]:
    return [n for n, line in enumerate(markdown.splitlines(), start=1) if line.startswith("## ")]


def test_the_readme_starts_with_the_run_and_the_test_command() -> None:
    text = README.read_text(encoding="utf-8")
    first, second = fenced_blocks(text)[:2]
    assert (first.lang, second.lang) == ("sh", "sh")
    assert "oblivio" in first.code
    assert "pytest" in second.code
    assert second.line < _heading_lines(text)[0], "the commands must come before any section"


def readme_test_command() -> str:
    second = fenced_blocks(README.read_text(encoding="utf-8"))[1]
    [command] = [line.strip() for line in second.code.splitlines() if "pytest" in line]
    return command


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    ci_lines = [line.strip() for line in CI_SCRIPT.read_text(encoding="utf-8").splitlines()]
    assert readme_test_command() in ci_lines


def command_paths(group: click.Group, prefix: str = "") -> Iterator[str]:
    """Every visible command below ``group``, as the words typed after ``oblivio``."""
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is None or command.hidden:
            continue
        path = f"{prefix}{name}"
        yield path
        if isinstance(command, click.Group):
            yield from command_paths(command, f"{path} ")


def is_documented(path: str, docs: str) -> bool:
    return re.search(rf"\boblivio {re.escape(path)}(?![\w-])", docs) is not None


def test_every_cli_command_is_documented() -> None:
    from oblivio.cli import main

    paths = list(command_paths(main))
    assert {"demo", "db upgrade", "verify-log"} <= set(paths)
    docs = "\n".join(p.read_text(encoding="utf-8") for p in doc_files())
    undocumented = [p for p in paths if not is_documented(p, docs)]
    assert undocumented == [], "document these in README.md or docs/*.md as 'oblivio <command>'"


def test_documentation_check_needs_the_whole_command_path() -> None:
    assert is_documented("db upgrade", "run `oblivio db upgrade` first")
    assert not is_documented("verify", "see `oblivio verify-log`")
    assert not is_documented("demo", "oblivio demonstrates")
