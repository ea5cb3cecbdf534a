"""``oblivio import FILE``: the command stores a JSON Lines file and says how much."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from oblivio import MemoryClient
from oblivio.cli import main


def test_import_stores_the_file_and_reports_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = tmp_path / "memories.jsonl"
    path.write_text(
        '{"user_id": "alice", "content": "Alice lives in Lisbon"}\n'
        '{"user_id": "bob", "content": "Bob plays chess"}\n'
    )
    result = CliRunner().invoke(main, ["--data-dir", str(data), "import", str(path)])
    assert result.exit_code == 0, result.output
    assert "imported 2 memories of 2 users in 2 transactions" in result.output
    with MemoryClient(data) as memory:
        assert [e.content for e in memory.get_events(user_id="bob")] == ["Bob plays chess"]


def test_a_bad_line_is_named_and_nothing_is_stored(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = tmp_path / "memories.jsonl"
    path.write_text('{"user_id": "alice", "content": "fine"}\n{"user_id": "alice"}\n')
    result = CliRunner().invoke(main, ["--data-dir", str(data), "import", str(path)])
    assert result.exit_code != 0
    assert "memories.jsonl:2" in result.output
    with MemoryClient(data) as memory:
        assert memory.get_events(user_id="alice") == []
