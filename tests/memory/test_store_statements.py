"""What store() asks the database, beyond the append itself.

Without a request id the log draws the event id, so there is nothing to look
up; the owner's data key comes with the stream lock.  With a request id the
earlier append must be found, so the lookup stays.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from oblivio import MemoryClient

# The idempotency lookup reads events by id; a second key read selects data_keys alone.
EVENT_LOOKUP = re.compile(r"^\s*SELECT\b.*\bFROM events\b.*\bevent_id IN\b", re.S | re.I)
KEY_READ = re.compile(r"^\s*SELECT\b.*\bFROM data_keys\s+WHERE\b", re.S | re.I)


@contextmanager
def statements(client: MemoryClient) -> Iterator[list[str]]:
    """Every SQL statement the client's engine runs inside the block."""
    seen: list[str] = []
    engine = client.context.store.backend.engine

    def record(*args: Any) -> None:
        seen.append(args[2])

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)


def test_store_without_request_id_reads_neither_events_nor_keys(memory: MemoryClient) -> None:
    memory.store("Alice lives in Berlin", user_id="alice")  # the stream exists from here
    with statements(memory) as seen:
        memory.store("Alice moved to Paris", user_id="alice")
    assert seen, "the listener saw nothing"
    assert not [s for s in seen if EVENT_LOOKUP.search(s)]
    assert not [s for s in seen if KEY_READ.search(s)]


def test_store_with_request_id_looks_up_the_earlier_append(memory: MemoryClient) -> None:
    request = uuid.uuid4()
    first = memory.store("Alice lives in Berlin", user_id="alice", request_id=request)
    with statements(memory) as seen:
        again = memory.store("Alice lives in Berlin", user_id="alice", request_id=request)
    assert again == first
    assert [s for s in seen if EVENT_LOOKUP.search(s)]
