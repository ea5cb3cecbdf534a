"""What a retrieve asks the database: the retrieval service's state token (two
statements: the stream row and what lies beside it, then what lies with the stream's
rows, by stream id, which Citus routes to one shard) carries what the likely-update
wait and the Art. 18 check need, so a consistent retrieve with nothing pending (warm
index, vector state and detector past the caller's last write) sends those two
statements and nothing else; a restriction still takes effect for the very next call,
cache or not.  Both backends and Citus."""

from __future__ import annotations

import re

import pytest

from oblivio import MemoryClient
from tests.conftest import WITH_CITUS
from tests.memory._support import statements
from tests.memory.conftest import settings_of_backend

# The token statement must plan on the Citus tier too: the ``memory`` fixture takes this.
memory_settings = pytest.fixture(params=WITH_CITUS)(settings_of_backend)

USER = "alice"
FACTS = ("I keep basil on the kitchen windowsill.", "My favourite colour is green.")
# The state token statement: the subject's stream from the directory, and with it the
# restriction and both followers' checkpoints (the vector state's and the detector's,
# "followed").
TOKEN = re.compile(r"^\s*SELECT\b.*\bFROM \(SELECT stream_directory\.", re.S)
CONTROL = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK)\b", re.I)
TOKEN_PARTS = ("subject_restrictions", "projection_checkpoints AS followed", "erasure_requests")
# The token's second statement: the stream's head, its last event, the subject's embedder,
# the backfill mark.
STREAM_STATE_PARTS = (
    "FROM streams",
    "FROM events",
    "FROM subject_embedders",
    "FROM memory_graph_backfills",
)


def _warm(memory: MemoryClient) -> None:
    for text in FACTS:
        memory.store(text, user_id=USER)
    memory.retrieve("basil", user_id=USER)  # judged, caught up, index cached
    memory.retrieve("basil", user_id=USER)


def test_a_consistent_retrieve_with_nothing_pending_sends_the_token_alone(
    memory: MemoryClient,
) -> None:
    _warm(memory)
    ctx = memory.context
    head = ctx.store.head(ctx.namespace, USER)
    assert head is not None
    partition = ctx.updates.partition_of(head.stream.stream_id)
    judged_up_to = ctx.updates.checkpoint(partition)
    with statements(memory) as seen:
        answer = memory.retrieve("basil", user_id=USER)
    assert answer.results
    assert not answer.restricted
    [query, state] = [s for s in seen if not CONTROL.match(s)]  # SQLite's reads say BEGIN
    assert TOKEN.search(query), query
    assert all(part in query for part in TOKEN_PARTS), query
    assert all(part in state for part in STREAM_STATE_PARTS), state
    assert ctx.updates.checkpoint(partition) == judged_up_to  # no page was needed


def test_a_consistent_retrieve_waits_for_the_detector_to_judge_the_last_write(
    memory: MemoryClient,
) -> None:
    _warm(memory)
    ctx = memory.context
    memory.store("My favourite colour is blue now.", user_id=USER)
    last = ctx.store.last_cursor(ctx.namespace, USER)
    head = ctx.store.head(ctx.namespace, USER)
    assert last is not None
    assert head is not None
    partition = ctx.updates.partition_of(head.stream.stream_id)
    assert ctx.updates.checkpoint(partition) < last  # nothing runs the detector here
    memory.retrieve("colour", user_id=USER, consistent=False)
    assert ctx.updates.checkpoint(partition) < last  # an eventual read does not wait
    memory.retrieve("colour", user_id=USER)
    assert ctx.updates.checkpoint(partition) >= last


def test_a_restriction_applies_to_the_next_retrieve_of_a_cached_subject(
    memory: MemoryClient,
) -> None:
    _warm(memory)
    memory.store("I play chess on Sundays.", user_id=USER)  # pending for the detector
    ctx = memory.context
    head = ctx.store.head(ctx.namespace, USER)
    assert head is not None
    partition = ctx.updates.partition_of(head.stream.stream_id)
    memory.restrict(USER, ground="art18-1-a", reference="T-7")
    judged_up_to = ctx.updates.checkpoint(partition)
    for consistent in (True, False):
        answer = memory.retrieve("basil", user_id=USER, consistent=consistent)
        assert answer.restricted
        assert answer.results == []
    assert ctx.updates.checkpoint(partition) == judged_up_to  # refused before any wait
    memory.lift_restriction(USER, reference="T-7")
    answer = memory.retrieve("basil", user_id=USER)
    assert not answer.restricted
    assert answer.results
