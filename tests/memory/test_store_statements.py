"""What store() asks the database, beyond the append itself.

Without a request id the log draws the event id, so there is nothing to look
up; the owner's data key comes with the stream row, read with its lock.  With
a request id the earlier append must be found, so the lookup stays.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import Pool

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections.extraction import NodeDraft, OneNodePerEvent
from projections.model import NodeType
from tests.memory._support import round_trips, statements
from tests.memory.conftest import Opener

# The idempotency lookup reads events by id; a second key read selects data_keys alone.
EVENT_LOOKUP = re.compile(r"^\s*SELECT\b.*\bFROM events\b.*\bevent_id (IN\b|= ANY\b)", re.S | re.I)
KEY_READ = re.compile(r"^\s*SELECT\b.*\bFROM data_keys\s+WHERE\b", re.S | re.I)


def test_store_without_request_id_reads_neither_events_nor_keys(reopen: Opener) -> None:
    first = reopen()
    first.store("Alice lives in Berlin", user_id="alice")  # the stream exists from here
    for client in (reopen(), first):  # a process new to the stream, and the one that wrote
        with statements(client) as seen:
            client.store("Alice moved to Paris", user_id="alice")
        assert seen, "the listener saw nothing"
        for statement in seen:
            assert not EVENT_LOOKUP.search(statement)
            assert not KEY_READ.search(statement)


def test_store_with_request_id_looks_up_the_earlier_append(memory: MemoryClient) -> None:
    request = uuid.uuid4()
    first = memory.store("Alice lives in Berlin", user_id="alice", request_id=request)
    with statements(memory) as seen:
        again = memory.store("Alice lives in Berlin", user_id="alice", request_id=request)
    assert again == first
    assert [s for s in seen if EVENT_LOOKUP.search(s)]


class CountingExtractor(OneNodePerEvent):
    """The default extractor, counting its calls made from the calling thread."""

    def __init__(self) -> None:
        self.calls = 0
        self._caller = threading.get_ident()

    def extract(self, content: str, node_type: NodeType) -> list[NodeDraft]:
        if threading.get_ident() == self._caller:
            self.calls += 1
        return super().extract(content, node_type)


def test_store_runs_the_extractor_once(tmp_path: Path) -> None:
    extractor = CountingExtractor()
    with MemoryClient(tmp_path / "memory", extractor=extractor) as client:
        for n, request in enumerate((None, uuid.uuid4())):
            event_id = client.store(f"Alice likes tea {n}", user_id="alice", request_id=request)
            assert extractor.calls == n + 1
            [node] = client.get_event_nodes(event_id, user_id="alice")
            assert node.content == f"Alice likes tea {n}"


@pytest.mark.postgres
def test_a_store_waits_once_on_postgresql_at_the_head_it_remembers(pg_settings: Settings) -> None:
    """The append at the remembered head, its graph rows in the same autocommitted
    statement: one wait, for one memory as for a batch.  Without a remembered head
    (a process new to the subject): the stream directory's read with BEGIN, the
    stream's lock by id, the append with the COMMIT in one pipeline; after another
    process moved the head: the append that misses, then the lock (its id known),
    the append with the COMMIT."""
    with MemoryClient(settings=pg_settings) as client:
        client.store("Alice lives in Berlin", user_id="alice")  # the stream exists
        stored = round_trips(lambda: client.store("Alice moved", user_id="alice"))
        batch = [{"content": f"Alice fact {n}"} for n in range(50)]
        many = round_trips(lambda: client.store_many(batch, user_id="alice"))
        with MemoryClient(settings=pg_settings) as other:
            first = round_trips(lambda: other.store("Alice is back", user_id="alice"))
            # The head moved under ``client``: its append misses, then goes the lock's way.
            contested = round_trips(lambda: client.store("Alice left", user_id="alice"))
    assert (stored, many, first, contested) == (1, 1, 3, 3)


@pytest.mark.postgres
def test_a_persons_first_store_waits_three_times_on_postgresql(pg_settings: Settings) -> None:
    """A new person's stream is created and appended to in one transaction: BEGIN with
    the stream directory's read (nothing there), the directory's row (its id), then
    the stream row, the data key, the append and the COMMIT in one pipeline.  The new
    stream is not read back nor locked again: nobody else sees it before the COMMIT."""
    with MemoryClient(settings=pg_settings) as client:
        client.store("Bob lives in Rome", user_id="bob")  # the process's first store
        first = round_trips(lambda: client.store("Alice lives in Berlin", user_id="alice"))
    assert first == 3


def test_a_store_is_one_transaction_on_sqlite_without_a_lock_read(tmp_path: Path) -> None:
    """At the remembered head: BEGIN IMMEDIATE, the head's conditional move and the
    rows, COMMIT; no read of the stream row first (SQLite's own trace of the
    statements it runs, whichever way they were sent)."""
    with MemoryClient(tmp_path / "memory") as client:
        client.store("Alice lives in Berlin", user_id="alice")
        seen: list[str] = []
        traced: list[sqlite3.Connection] = []

        def trace(driver: sqlite3.Connection, *_: object) -> None:
            if threading.get_ident() == caller:
                driver.set_trace_callback(seen.append)
                traced.append(driver)

        caller = threading.get_ident()
        sa.event.listen(Pool, "checkout", trace)
        try:
            client.store("Alice moved", user_id="alice")
        finally:
            sa.event.remove(Pool, "checkout", trace)
            for driver in traced:
                driver.set_trace_callback(None)
    begins = [s for s in seen if s.strip().upper().startswith("BEGIN")]
    reads = [s for s in seen if re.search(r"^\s*SELECT\b.*\bFROM streams\b", s, re.S | re.I)]
    moves = [s for s in seen if re.search(r"^\s*UPDATE streams\b", s, re.S | re.I)]
    commits = [s for s in seen if s.strip().upper() == "COMMIT"]
    assert (len(begins), len(reads), len(moves), len(commits)) == (1, 0, 1, 1), seen
