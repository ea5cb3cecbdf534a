"""Importing JSON Lines and subject exports: checked whole, then stored chunk by chunk.

A file with one bad line writes nothing and names the line; each person's
memories are stored in file order through ``store_many``; a subject export
comes back with its effective times, keyed so that a second import stores
nothing again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eventstore.errors import InvalidInputError
from oblivio import MemoryClient
from oblivio.memory import imports
from tests.memory._support import log_ids


def jsonl(path: Path, lines: list[object]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_each_persons_memories_are_stored_in_file_order(
    memory: MemoryClient, tmp_path: Path
) -> None:
    lines = [
        {"user_id": "alice", "content": "Alice lives in Lisbon"},
        {"user_id": "bob", "content": "Bob plays chess", "meta": {"source": "chat"}},
        {"user_id": "alice", "content": "Alice moved", "occurred_at": "2023-02-01T00:00:00Z"},
    ]
    done: list[int] = []
    report = imports.import_file(
        memory.context, jsonl(tmp_path / "a.jsonl", lines), chunk=1, progress=done.append
    )
    assert (report.memories, report.users, report.chunks) == (3, 2, 3)
    assert sum(done) == 3
    alice = memory.get_events(user_id="alice")
    assert [e.content for e in alice] == ["Alice lives in Lisbon", "Alice moved"]
    assert alice[1].occurred_at.year == 2023
    [bob] = memory.get_events(user_id="bob")
    assert bob.meta["source"] == "chat"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 2 is not JSON"),
        ('{"user_id": "alice", "content": ""}', "a.jsonl:2"),
        ('{"user_id": "alice", "content": "x", "colour": "red"}', "unknown fields: colour"),
        ('{"content": "nobody"}', "a.jsonl:2"),
        ("[1, 2]", "line 2 is not a JSON object"),
    ],
)
def test_one_bad_line_writes_nothing(
    memory: MemoryClient, tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"user_id": "alice", "content": "Alice lives in Lisbon"}\n' + line + "\n")
    before = log_ids(memory)
    with pytest.raises(InvalidInputError, match=message):
        imports.import_file(memory.context, path)
    assert log_ids(memory) == before


def test_a_subject_export_comes_back_once(memory: MemoryClient, tmp_path: Path) -> None:
    memory.store("Alice lives in Lisbon", user_id="alice", occurred_at="2020-01-01T00:00:00Z")
    memory.store("Alice plays the cello", user_id="alice", meta={"mood": "calm"})
    path = tmp_path / "alice.json"
    path.write_text(json.dumps(memory.export_subject(user_id="alice"), default=str))
    imports.import_file(memory.context, path, user_id="carol")
    written = log_ids(memory)
    imports.import_file(memory.context, path, user_id="carol")  # keyed: nothing new
    assert log_ids(memory) == written
    alice, carol = memory.get_events(user_id="alice"), memory.get_events(user_id="carol")
    assert [(e.content, e.occurred_at, e.meta) for e in carol] == [
        (e.content, e.occurred_at, e.meta) for e in alice
    ]


def test_json_that_is_not_an_export_is_refused(memory: MemoryClient, tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"format": "something-else", "events": []}, indent=2))
    with pytest.raises(InvalidInputError, match="export"):
        imports.import_file(memory.context, path)
