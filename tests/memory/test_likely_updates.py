"""Likely updates (issue 29): a person's new memory that changes an earlier one of theirs.

The detector runs after commit (workers.updates); a consistent retrieval and
``wait_for_extraction`` wait for it.  Its decision is a memory.likely_update
event: visible in the assertion state, honoured by default retrieval (the newer
memory where the older would rank, the older right below), confirmed (the
journaled supersede) or rejected (both stand) by explicit call, and undone by
erasing the newer memory.  Both backends, through the public facade.
"""

from __future__ import annotations

import threading
import uuid

import pytest

from oblivio import MemoryClient
from oblivio.errors import NodeUnavailableError, NoLikelyUpdateError
from projections import events as ev
from projections.errors import NotCaughtUpError
from projections.model import LifecycleState
from tests.memory.test_ingest import USER, replay_equal

#: How long the vector state is held: five times the consistency timeout the test sets.
HELD_SECONDS = 5.0
FILLER = ("I keep basil on the kitchen windowsill.", "My favourite colour is green.")


def node_of(memory: MemoryClient, event_id: uuid.UUID) -> uuid.UUID:
    [node] = memory.get_event_nodes(event_id, user_id=USER)
    return node.id


def stored(memory: MemoryClient, *texts: str) -> list[uuid.UUID]:
    """The nodes of ``texts``, stored after the filler and judged (a consistent
    retrieval waits for the detector)."""
    for text in FILLER:
        memory.store(text, user_id=USER)
    nodes = [node_of(memory, memory.store(text, user_id=USER)) for text in texts]
    memory.retrieve("anything", user_id=USER)
    return nodes


def first_two(memory: MemoryClient, question: str) -> list[uuid.UUID]:
    found = memory.retrieve(question, user_id=USER, limit=2)
    return [r.node.id for r in found.results]


def log_of(memory: MemoryClient) -> list[tuple[uuid.UUID, str]]:
    """The person's whole stream (every event type), as (id, type), live events only."""
    ctx = memory.context
    events = ctx.store.read_stream(ctx.namespace, USER)
    return [(e.event_id, e.type) for e in events if e.data is not None]


def test_a_change_in_plain_words_comes_first_and_the_old_memory_right_below(
    memory: MemoryClient,
) -> None:
    old, new = stored(
        memory, "I paddle a green kayak on the lake.", "I sold the kayak and swim now."
    )
    assert first_two(memory, "How do I get out on the lake by kayak?") == [new, old]
    found = memory.retrieve("kayak on the lake", user_id=USER, limit=1).results[0]
    assert found.node.id == new
    assert found.components.succession > 0
    state = memory.get_assertion_state(old, user_id=USER)
    assert state is not None
    assert state.lifecycle is LifecycleState.ACTIVE
    decision = state.likely_updated_by
    assert decision is not None
    assert (decision.old_node_id, decision.new_node_id, decision.status) == (old, new, "open")
    assert decision.detector == "oblivio.updates.en"
    assert decision.version == 2
    assert "change_verb:sold" in decision.cues
    assert 0.5 <= decision.confidence <= 1
    newer = memory.get_assertion_state(new, user_id=USER)
    assert newer is not None
    assert [d.old_node_id for d in newer.likely_updates] == [old]
    replay_equal(memory)


@pytest.mark.parametrize(
    "newer",
    [
        "My brother sold his kayak last week.",  # someone else
        "I borrowed a friend's canoe today to go on the lake.",  # a one-off
        "I might sell the kayak one day.",  # a plan
        "I won't ever sell the kayak, it gets me onto the lake.",  # a change denied
        "I started paddling a kayak on the lake years ago.",  # long before, still so
        "I got some new kayak stickers for the lake.",  # things added, none replaced
        "Now you're paddling a kayak too!",  # the listener
        "I have paddled a kayak on the lake for a year now.",  # a state that goes on
    ],
)
def test_what_someone_else_does_a_one_off_or_a_plan_updates_nothing(
    memory: MemoryClient, newer: str
) -> None:
    old, _ = stored(memory, "I paddle a green kayak on the lake.", newer)
    state = memory.get_assertion_state(old, user_id=USER)
    assert state is not None
    assert state.likely_updated_by is None
    assert first_two(memory, "Which kayak do I paddle on the lake?")[0] == old


def test_an_ingested_message_is_judged_before_wait_for_extraction_returns(
    memory: MemoryClient,
) -> None:
    first = memory.ingest("My dentist is Dr Lund.", user_id=USER, wait_for_extraction=True)
    second = memory.ingest(
        "Dr Lund retired, my new dentist is Dr Berg.", user_id=USER, wait_for_extraction=True
    )
    [old], [new] = first.note_node_ids, second.note_node_ids
    state = memory.get_assertion_state(old, user_id=USER)
    assert state is not None
    assert state.likely_updated_by is not None
    assert state.likely_updated_by.new_node_id == new
    found = memory.retrieve("Who is my dentist?", user_id=USER, limit=1)
    assert found.results[0].node.id == new


def test_confirming_supersedes_the_older_memory(memory: MemoryClient) -> None:
    old, new = stored(memory, "My gym is Ironworks.", "I cancelled Ironworks and joined a pool.")
    correction = memory.confirm_likely_update(old, user_id=USER, actor_id="tester")
    assert correction.node_ids == (old, new)
    state = memory.get_assertion_state(old, user_id=USER)
    assert state is not None
    assert state.lifecycle is LifecycleState.SUPERSEDED
    assert state.superseded_by == new
    assert state.likely_updated_by is not None
    assert state.likely_updated_by.status == "confirmed"
    assert old not in first_two(memory, "Which gym is Ironworks?")
    with pytest.raises(NoLikelyUpdateError):
        memory.confirm_likely_update(old, user_id=USER)
    replay_equal(memory)


def test_rejecting_leaves_both_standing(memory: MemoryClient) -> None:
    old, new = stored(memory, "My gym is Ironworks.", "I cancelled Ironworks and joined a pool.")
    rejection = memory.reject_likely_update(old, user_id=USER)
    assert rejection.node_ids == (old, new)
    assert log_of(memory)[-1] == (rejection.event_id, ev.LIKELY_UPDATE_REJECTED)
    state = memory.get_assertion_state(old, user_id=USER)
    assert state is not None
    assert state.lifecycle is LifecycleState.ACTIVE
    assert state.likely_updated_by is not None
    assert state.likely_updated_by.status == "rejected"
    found = memory.retrieve("My gym is Ironworks", user_id=USER, limit=1).results[0]
    assert found.node.id == old
    assert found.components.succession == 0
    with pytest.raises(NoLikelyUpdateError):
        memory.reject_likely_update(old, user_id=USER)
    replay_equal(memory)


def test_bad_input_to_confirm_or_reject_writes_nothing(memory: MemoryClient) -> None:
    old, new = stored(memory, "My gym is Ironworks.", "I cancelled Ironworks and joined a pool.")
    memory.store("I have a dog.", user_id="someone-else")
    before = log_of(memory)
    for call in (memory.confirm_likely_update, memory.reject_likely_update):
        with pytest.raises(NodeUnavailableError):
            call(uuid.uuid4(), user_id=USER)
        with pytest.raises(NodeUnavailableError):  # another person's node
            call(old, user_id="someone-else")
        with pytest.raises(NoLikelyUpdateError):  # the newer one has no successor
            call(new, user_id=USER)
        with pytest.raises(NodeUnavailableError):  # a malformed id names no node
            call("not-an-id", user_id=USER)
    assert log_of(memory) == before


def test_erasing_the_newer_memory_reinstates_the_older(memory: MemoryClient) -> None:
    for text in FILLER:
        memory.store(text, user_id=USER)
    old = node_of(memory, memory.store("My gym is Ironworks.", user_id=USER))
    newer = memory.store("I cancelled Ironworks and joined a pool.", user_id=USER)
    decision = ev.likely_update_event_id(newer)
    memory.retrieve("anything", user_id=USER)  # judged
    assert (decision, ev.LIKELY_UPDATE) in log_of(memory)
    memory.delete_event(newer, user_id=USER)
    # The decision derives from the memory: erased (and counted) with it.
    assert decision not in {event_id for event_id, _ in log_of(memory)}
    state = memory.get_assertion_state(old, user_id=USER)
    assert state is not None
    assert state.likely_updated_by is None
    assert first_two(memory, "Which gym is Ironworks?")[0] == old
    memory.context.rebuilder.run_pending()
    replay_equal(memory)


@pytest.mark.parametrize(
    "memory_settings", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_the_detector_waits_for_the_vector_state_as_long_as_the_context_says(
    memory: MemoryClient,
) -> None:
    """A consistent read that waits for the detector is bounded by the context's
    consistency timeout, and so is the detector's own wait for the vector state inside
    it: the vector state held for longer than the timeout fails the read, and the
    detector judges once it is free.  (PostgreSQL: another transaction can hold the
    vector state's checkpoints, as a busy runner of another process does.)"""
    ctx = memory.context
    ctx.consistency_timeout = 1.0
    [old] = stored(memory, "My locker code is 1234.")
    memory.store("My locker code changed to 5678.", user_id=USER)
    held, release = threading.Event(), threading.Event()

    def hold_the_vector_state() -> None:
        with ctx.store.transaction() as tx:
            ctx.runner.hold(tx.connection)
            held.set()
            release.wait(HELD_SECONDS)

    holder = threading.Thread(target=hold_the_vector_state)
    holder.start()
    try:
        assert held.wait(30)
        # The vector state stays held for five times the timeout: a detector that
        # waited longer than the read may (it once waited 10 s) would see it freed.
        with pytest.raises(NotCaughtUpError):
            memory.retrieve("locker code", user_id=USER)
    finally:
        release.set()
        holder.join()
    memory.retrieve("locker code", user_id=USER)
    state = memory.get_assertion_state(old, user_id=USER)
    assert state is not None
    assert state.likely_updated_by is not None
