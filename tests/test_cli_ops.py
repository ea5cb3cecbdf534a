"""Operating commands: ``oblivio keys list``, ``oblivio verify-export``, and start-up imports."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from oblivio.cli import main


def run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_keys_list_says_when_there_are_none(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(*data, "keys", "list") == (
        "no API keys yet; create one with: oblivio keys create --principal operator\n"
    )
    assert json.loads(run(*data, "keys", "list", "--json")) == []

    token = run(*data, "keys", "create", "--principal", "auditor").strip()
    listing = run(*data, "keys", "list")
    assert token.split("_")[1] in listing
    assert "auditor" in listing
    assert "no API keys" not in listing
