"""Operating commands: ``oblivio keys list``, ``oblivio verify-export``, and start-up imports."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from oblivio import MemoryClient
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


def test_verify_export_checks_subject_and_audit_exports_offline(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    with MemoryClient(tmp_path / "data") as client:
        client.store("I keep bees.", user_id="ana")
        client.store("I live by the sea.", user_id="ana")
        client.store("I am leaving.", user_id="bob")
        client.forget("bob", wait=True)  # audit entries to export
    subject, audit, jwks = (tmp_path / n for n in ("ana.json", "audit.jsonl", "jwks.json"))
    run(*data, "export", "subject", "ana", "-o", str(subject))
    run(*data, "export", "audit", "-o", str(audit))
    jwks.write_text(run(*data, "keys", "jwks"))

    said = run("verify-export", str(subject), "--jwks", str(jwks))
    assert said.startswith("ok: subject export of ")
    assert "2 events" in said
    assert run("verify-export", str(audit), "--jwks", str(jwks)).startswith("ok: ")

    exported = json.loads(subject.read_text())
    exported["events"][0]["data"]["content"] = "I keep wasps."
    subject.write_text(json.dumps(exported))
    refused = CliRunner().invoke(main, ["verify-export", str(subject), "--jwks", str(jwks)])
    assert refused.exit_code == 1
    assert "does not match its signed manifest" in refused.output

    lines = audit.read_text().splitlines(keepends=True)
    assert len(lines) >= 3
    audit.write_text("".join(lines[:-2] + lines[-1:]))  # one entry dropped
    refused = CliRunner().invoke(main, ["verify-export", str(audit), "--jwks", str(jwks)])
    assert refused.exit_code == 1
    assert "manifest" in refused.output

    stranger = tmp_path / "stranger.json"
    stranger.write_text(run("--data-dir", str(tmp_path / "other"), "keys", "jwks"))
    run(*data, "export", "subject", "ana", "-o", str(subject))
    refused = CliRunner().invoke(main, ["verify-export", str(subject), "--jwks", str(stranger)])
    assert refused.exit_code == 1
    assert "does NOT verify (unknown_kid)" in refused.output
