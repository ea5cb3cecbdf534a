"""``oblivio dpo``: the desk's operations on the host's command line."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from click.testing import CliRunner

from eventstore import subject_rights
from oblivio import MemoryClient
from oblivio.cli import main
from oblivio.cli_dpo import (
    EXTENSION_REASONS,
    HOLD_GROUNDS,
    REQUEST_KINDS,
    REQUEST_STATUSES,
    RESTRICTION_GROUNDS,
)


def test_the_spelled_out_vocabularies_are_the_stores() -> None:
    assert set(RESTRICTION_GROUNDS) == set(subject_rights.RESTRICTION_GROUNDS)
    assert set(HOLD_GROUNDS) == set(subject_rights.HOLD_GROUNDS)
    assert set(EXTENSION_REASONS) == set(subject_rights.EXTENSION_REASONS)
    assert set(REQUEST_KINDS) == set(subject_rights.REQUEST_KINDS)
    assert set(REQUEST_STATUSES) == set(subject_rights.REQUEST_STATUSES)


def test_a_person_is_looked_up_restricted_held_and_registered(tmp_path: Path) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    with MemoryClient(tmp_path / "data") as client:
        client.store("Alice keeps bees", user_id="alice")

    def run(*args: str, code: int = 0) -> str:
        result = CliRunner().invoke(main, [*data, "dpo", *args])
        assert result.exit_code == code, result.output
        return result.stdout if code == 0 else result.output

    person = json.loads(run("lookup", "alice"))
    assert person["holds_data"] is True
    assert person["restriction"] is None
    json.loads(run("restrict", "alice", "--ground", "art18-1-a", "--reference", "T-1"))
    assert json.loads(run("lookup", "alice"))["restriction"]["reference"] == "T-1"
    run("lift-restriction", "alice", "--reference", "T-1")
    run("hold", "alice", "--ground", "art17-3-e", "--reference", "CASE/9")
    refused = run("forget", "alice", "--reference", "T-2", code=1)
    assert "art17-3-e" in refused
    run("lift-hold", "alice", "--reference", "CASE/9")
    exported = json.loads(run("export", "alice", "--reference", "T-3"))
    assert exported["events"]

    rows = list(csv.DictReader(io.StringIO(run("register", "--format", "csv"))))
    assert {(r["kind"], r["status"]) for r in rows} == {
        ("restriction", "completed"),
        ("erasure", "refused"),
        ("access", "completed"),
    }
    access = next(r for r in rows if r["kind"] == "access")
    extended = json.loads(run("extend", access["request_id"], "--reason", "complexity"))
    assert extended["extension_reason"] == "complexity"
    assert run("lookup", "alice", "--bogus", code=2)
