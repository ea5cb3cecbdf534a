"""The stream heads a process remembers for its appends (eventstore.heads)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from eventstore import EventStore, NewEvent, RecordedEvent, Subject
from eventstore.batch import DerivedRows
from eventstore.codec import WrappedKey
from eventstore.heads import StreamHeads
from eventstore.model import StreamRef
from eventstore.transaction import AppendHead
from oblivio import MemoryClient


def head(stream_id: int, version: int, subject: bytes = b"s" * 32) -> AppendHead:
    ref = StreamRef(stream_id, "default", subject, 1)
    return AppendHead(ref, version, b"h" * 32, WrappedKey(uuid.uuid4(), 1, b"w" * 60))


def test_the_least_recently_used_head_leaves_first_beyond_the_bound() -> None:
    heads = StreamHeads(max_subjects=2)
    a, b, c = (head(n, 1, os.urandom(32)) for n in (1, 2, 3))
    heads.put(a)
    heads.put(b)
    assert heads.get("default", a.ref.subject_key) is a  # a is now the more recent
    heads.put(c)
    assert len(heads) == 2
    assert heads.get("default", b.ref.subject_key) is None
    assert heads.get("default", a.ref.subject_key) is a


def test_a_later_head_of_the_generation_is_not_replaced_by_an_earlier_one() -> None:
    heads = StreamHeads()
    heads.put(head(1, 5))
    heads.put(head(1, 4))  # another thread's append that finished last
    kept = heads.get("default", b"s" * 32)
    assert kept is not None
    assert kept.version == 5
    heads.put(head(2, 1))  # a new generation replaces it whatever its version
    replaced = heads.get("default", b"s" * 32)
    assert replaced is not None
    assert replaced.ref.stream_id == 2


def test_a_miss_drops_only_the_head_it_missed_at() -> None:
    heads = StreamHeads()
    missed, newer = head(1, 5), head(1, 6)
    heads.put(missed)
    heads.put(newer)
    heads.drop(missed)
    assert heads.get("default", b"s" * 32) is newer
    heads.drop(newer)
    assert heads.get("default", b"s" * 32) is None


def test_closing_the_store_forgets_every_remembered_head(tmp_path: Path) -> None:
    with MemoryClient(tmp_path / "memory") as client:
        client.store("Alice likes tea", user_id="alice")
        heads = client.context.store.heads
        assert len(heads) == 1
    assert len(heads) == 0


def test_an_append_at_the_remembered_head_returns_the_events_as_stored(store: EventStore) -> None:
    """What ``append_each`` returns for an append at a remembered head (no lock) is what
    a read finds: every field, its place in the log included."""
    subject = Subject("default", "alice")

    def events_of(_stream: StreamRef) -> list[NewEvent]:
        return [NewEvent("memory.stored", {"content": "Alice likes tea"})]

    def nothing(_cipher: object, appended: list[RecordedEvent]) -> tuple[list[DerivedRows], int]:
        return [], len(appended)

    store.append_each(subject, events_of, nothing)  # the stream's first: under its lock
    assert len(store.heads) == 1
    appended, derived = store.append_each(subject, events_of, nothing)
    assert derived == 1
    [(returned, replayed)] = appended
    assert not replayed
    [read] = store.read_stream("default", "alice", from_version=2)
    assert returned == read
    assert returned.cursor == read.cursor
    assert returned.cursor > store.read_stream("default", "alice")[0].cursor
