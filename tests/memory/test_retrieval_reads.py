"""What a retrieve asks the database: the retrieval service's state token (two
statements: the stream row and what lies beside it, then what lies with the stream's
rows, by stream id, which Citus routes to one shard) carries what the likely-update
wait and the Art. 18 check need, so a consistent retrieve with nothing pending (warm
index, vector state and detector past the caller's last write) sends those two
statements and nothing else; right after a store it has the detector judge the
caller's own stream, never a page of the detector's log partition; a restriction
still takes effect for the very next call, cache or not.  Both backends and Citus."""

from __future__ import annotations

import re

import pytest

from eventstore import LogCursor
from oblivio import MemoryClient
from projections import events as ev
from projections.storage import stream_marks
from tests.conftest import WITH_CITUS
from tests.memory._support import statements, stream
from tests.memory.conftest import settings_of_backend

# The token statement must plan on the Citus tier too: the ``memory`` fixture takes this.
memory_settings = pytest.fixture(params=WITH_CITUS)(settings_of_backend)

USER = "alice"
FACTS = ("I keep basil on the kitchen windowsill.", "My favourite colour is green.")
# The state token statement: the subject's stream from the directory, and with it the
# restriction and the erasure requests.
TOKEN = re.compile(r"^\s*SELECT\b.*\bFROM \(SELECT stream_directory\.", re.S)
# A page of a log partition: events by their stream id's remainder.
PARTITION_PAGE = re.compile(r"\bFROM events\b.*\bstream_id %", re.S)
CONTROL = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK)\b", re.I)
TOKEN_PARTS = ("subject_restrictions", "erasure_requests")
# The token's second statement: the stream's head, the subject's embedder, the backfill
# mark, the stream's marks of the vector state and of the detector.
STREAM_STATE_PARTS = (
    "FROM streams",
    "FROM subject_embedders",
    "FROM memory_graph_backfills",
    "FROM projection_stream_marks",
)


def _judged(memory: MemoryClient, user: str = USER) -> int:
    """The version of the user's stream's last event the detector judged (its mark)."""
    ctx = memory.context
    head = ctx.store.head(ctx.namespace, user)
    assert head is not None
    with ctx.store.reading() as view:
        versions = stream_marks.versions(view.connection, ctx.updates.name, [head.stream.stream_id])
    return versions.get(head.stream.stream_id, 0)


def _detector_checkpoints(memory: MemoryClient) -> list[LogCursor]:
    detector = memory.context.updates
    return [detector.checkpoint(p) for p in range(detector.partitions)]


def _warm(memory: MemoryClient) -> None:
    for text in FACTS:
        memory.store(text, user_id=USER)
    memory.retrieve("basil", user_id=USER)  # judged, caught up, index cached
    memory.retrieve("basil", user_id=USER)


def test_a_consistent_retrieve_with_nothing_pending_sends_the_token_alone(
    memory: MemoryClient,
) -> None:
    _warm(memory)
    judged = _judged(memory)
    with statements(memory) as seen:
        answer = memory.retrieve("basil", user_id=USER)
    assert answer.results
    assert not answer.restricted
    [query, state] = [s for s in seen if not CONTROL.match(s)]  # SQLite's reads say BEGIN
    assert TOKEN.search(query), query
    assert all(part in query for part in TOKEN_PARTS), query
    assert all(part in state for part in STREAM_STATE_PARTS), state
    assert _judged(memory) == judged  # nothing was judged


def test_a_consistent_retrieve_has_the_detector_judge_the_callers_stream_alone(
    memory: MemoryClient,
) -> None:
    _warm(memory)
    ctx = memory.context
    memory.store("My favourite colour is blue now.", user_id=USER)
    memory.store("I sold the kayak and swim now.", user_id="bob")  # another's, pending
    head = ctx.store.head(ctx.namespace, USER)
    assert head is not None
    checkpoints = _detector_checkpoints(memory)
    assert _judged(memory) < head.version  # nothing runs the detector here
    memory.retrieve("colour", user_id=USER, consistent=False)
    assert _judged(memory) < head.version  # an eventual read does not wait
    with statements(memory) as seen:
        memory.retrieve("colour", user_id=USER)
    # Judged, and its decision appended: the mark is past that too (a read right after
    # has nothing left to wait for).
    assert [e.type for e in stream(memory, USER)[head.version :]] == [ev.LIKELY_UPDATE]
    assert _judged(memory) == head.version + 1
    # By the caller's stream alone: no page of the log, no partition's checkpoint
    # moved, the other person's memory still unjudged.
    assert _detector_checkpoints(memory) == checkpoints
    assert not [s for s in seen if PARTITION_PAGE.search(s)]
    assert _judged(memory, "bob") == 0


def test_a_restriction_applies_to_the_next_retrieve_of_a_cached_subject(
    memory: MemoryClient,
) -> None:
    _warm(memory)
    memory.store("I play chess on Sundays.", user_id=USER)  # pending for the detector
    memory.restrict(USER, ground="art18-1-a", reference="T-7")
    judged, checkpoints = _judged(memory), _detector_checkpoints(memory)
    for consistent in (True, False):
        answer = memory.retrieve("basil", user_id=USER, consistent=consistent)
        assert answer.restricted
        assert answer.results == []
    # Refused before any wait.
    assert (_judged(memory), _detector_checkpoints(memory)) == (judged, checkpoints)
    memory.lift_restriction(USER, reference="T-7")
    answer = memory.retrieve("basil", user_id=USER)
    assert not answer.restricted
    assert answer.results
