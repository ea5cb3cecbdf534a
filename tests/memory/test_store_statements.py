"""What store() asks the database, beyond the append itself.

Without a request id the log draws the event id, so there is nothing to look
up; the owner's data key comes with the stream row, read with it (or with its
lock on the locked path).  At a head the process remembers, store() sends no
read at all (tests/memory/test_store_fast_path.py).  With a request id the
earlier append must be found, so the lookup stays.
"""

from __future__ import annotations

import re
import uuid

from oblivio import MemoryClient
from tests.memory._support import statements
from tests.memory.conftest import Opener

# The idempotency lookup reads events by id; a second key read selects data_keys alone.
EVENT_LOOKUP = re.compile(r"^\s*SELECT\b.*\bFROM events\b.*\bevent_id IN\b", re.S | re.I)
KEY_READ = re.compile(r"^\s*SELECT\b.*\bFROM data_keys\s+WHERE\b", re.S | re.I)


def test_store_without_request_id_reads_neither_events_nor_keys(reopen: Opener) -> None:
    first = reopen()
    first.store("Alice lives in Berlin", user_id="alice")  # the stream exists from here
    second = reopen()  # knows no head: reads it without a lock, then writes conditionally
    with statements(second) as seen:
        second.store("Alice moved to Paris", user_id="alice")
    # The unlocked head read (stream row and key in one statement) and the
    # conditional write both run on the driver, past SQLAlchemy: nothing else
    # may have been asked.
    assert seen == []
    with statements(first) as seen_locked:  # its head moved: the locked path
        first.store("Alice moved to Rome", user_id="alice")
    assert seen_locked, "the listener saw nothing"
    for statement in seen_locked:
        assert not EVENT_LOOKUP.search(statement)
        assert not KEY_READ.search(statement)


def test_store_with_request_id_looks_up_the_earlier_append(memory: MemoryClient) -> None:
    request = uuid.uuid4()
    first = memory.store("Alice lives in Berlin", user_id="alice", request_id=request)
    with statements(memory) as seen:
        again = memory.store("Alice lives in Berlin", user_id="alice", request_id=request)
    assert again == first
    assert [s for s in seen if EVENT_LOOKUP.search(s)]
