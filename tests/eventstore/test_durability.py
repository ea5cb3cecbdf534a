"""Acknowledged appends survive the writer being killed with SIGKILL, on both backends.

A writer process appends in a loop and prints each event id only after the
append has returned.  The test kills it mid-stream (most likely inside a
transaction), reopens the store and expects every printed event back with its
content, a chain that verifies, and a stream that takes new appends.
"""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

from eventstore import EventStore, KeyringFile, NewEvent, create_backend
from tests.eventstore import _writer

ACKNOWLEDGED = 200
SUBJECT = "durable-subject"


def acknowledged_events(url: str, keyring: Path, tmp_path: Path) -> dict[uuid.UUID, int]:
    """Run a writer until it acknowledged ``ACKNOWLEDGED`` appends, then SIGKILL it."""
    proc = _writer.start(
        "forever",
        f"--url={url}",
        f"--keyring={keyring}",
        f"--subject={SUBJECT}",
        stderr_path=tmp_path / "writer-stderr.txt",
    )
    try:
        try:
            lines = _writer.LineReader(proc).read_lines(ACKNOWLEDGED, timeout=90)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{(tmp_path / 'writer-stderr.txt').read_text()}") from e
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        _writer.stop(proc)
    acknowledged = {}
    for line in lines:
        event_id, n = line.split()
        acknowledged[uuid.UUID(event_id)] = int(n)
    return acknowledged


def test_acknowledged_appends_survive_kill_9(
    any_database_url: str, keyring: KeyringFile, tmp_path: Path
) -> None:
    acknowledged = acknowledged_events(any_database_url, keyring.path, tmp_path)
    assert sorted(acknowledged.values()) == list(range(ACKNOWLEDGED))

    store = EventStore(create_backend(any_database_url), KeyringFile(keyring.path))
    try:
        found = {e.event_id: e for e in store.get_events(list(acknowledged))}
        assert set(found) == set(acknowledged), "acknowledged events were lost"
        for event_id, n in acknowledged.items():
            assert found[event_id].data == _writer.forever_content(n)
            assert found[event_id].version == n + 1

        stream = store.read_stream(_writer.NAMESPACE, SUBJECT)
        assert [e.version for e in stream] == list(range(1, len(stream) + 1))
        assert len(stream) >= ACKNOWLEDGED
        assert [e.data for e in stream] == [_writer.forever_content(n) for n in range(len(stream))]
        assert store.verify().ok

        # The killed writer left no lock or half-written head behind.
        [after] = store.append(
            _writer.NAMESPACE, SUBJECT, [NewEvent("test.after", {})], expected_version=len(stream)
        )
        assert after.version == len(stream) + 1
        assert store.verify().ok
    finally:
        store.close()
