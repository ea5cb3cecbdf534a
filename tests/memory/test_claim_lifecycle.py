"""A claim's validity interval and what closed it, for explicit and automatic retirements.

Both backends, through the public facade: ``supersede()`` and
``resolve_contradiction()`` of a claim close its interval exactly where an
automatic retirement would, and ``get_assertion_state`` names the event that
did it either way.
"""

from __future__ import annotations

from datetime import UTC, datetime

from oblivio import MemoryClient
from projections.model import LifecycleState
from tests.memory.test_ingest import USER, claim_of, replay_equal, said

JANUARY = datetime(2026, 1, 1, tzinfo=UTC)
MARCH = datetime(2026, 3, 1, tzinfo=UTC)


def test_an_explicit_supersede_closes_the_interval_as_a_retirement_does(
    memory: MemoryClient,
) -> None:
    vim = said(memory, "I use Vim.", occurred_at=JANUARY)
    emacs = said(memory, "I use Emacs.", occurred_at=MARCH)  # no update: retires nothing
    [old], [new] = vim.claim_node_ids or (), emacs.claim_node_ids or ()
    assert claim_of(memory, vim).valid_to is None
    correction = memory.supersede(old, new, evidence_id=emacs.event_id, user_id=USER)

    state = memory.get_assertion_state(old, user_id=USER)
    assert state is not None
    assert state.claim is not None
    assert state.lifecycle is LifecycleState.SUPERSEDED
    assert state.superseded_by == new
    assert state.claim.valid_to == MARCH
    assert state.claim.retired_by_event_id == correction.event_id
    # The automatic path records the same: the interval, and the claims event.
    pump = said(memory, "I use an insulin pump.", occurred_at=JANUARY)
    stop = said(memory, "I don't use an insulin pump anymore.", occurred_at=MARCH)
    retired = claim_of(memory, pump)
    assert retired.valid_to == MARCH
    assert retired.retired_by_event_id == stop.plan_event_id
    replay_equal(memory)


def test_a_note_successor_closes_at_its_messages_effective_time(memory: MemoryClient) -> None:
    vim = said(memory, "I use Vim.", occurred_at=JANUARY)
    note = said(memory, "Editors are overrated.", occurred_at=MARCH)  # no claim, only a note
    [old], [successor] = vim.claim_node_ids or (), note.note_node_ids
    memory.supersede(old, successor, user_id=USER)
    assert claim_of(memory, vim).valid_to == MARCH
    replay_equal(memory)


def test_an_explicit_earlier_successor_never_closes_before_the_claim_began(
    memory: MemoryClient,
) -> None:
    later = said(memory, "I live in Boston.", occurred_at=MARCH)
    earlier = said(memory, "I live in Chicago.", occurred_at=JANUARY)
    [old], [new] = later.claim_node_ids or (), earlier.claim_node_ids or ()
    memory.supersede(old, new, user_id=USER)  # the caller's decision, against the dates
    assert claim_of(memory, later).valid_to == MARCH


def test_resolving_a_contradiction_closes_the_losers_interval(memory: MemoryClient) -> None:
    boston = said(memory, "I live in Boston.", occurred_at=JANUARY)
    chicago = said(memory, "I live in Chicago.", occurred_at=MARCH)
    [loser], [winner] = boston.claim_node_ids or (), chicago.claim_node_ids or ()
    memory.contradict(loser, winner, user_id=USER)
    resolution = memory.resolve_contradiction(winner, loser, user_id=USER)
    claim = claim_of(memory, boston)
    assert claim.valid_to == MARCH
    assert claim.retired_by_event_id == resolution.event_id
    assert claim_of(memory, chicago).valid_to is None
    replay_equal(memory)
