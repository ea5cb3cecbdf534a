"""An erased successor reinstates its predecessor (docs/erasure.md, "What an erasure leaves").

What an erasure leaves equals a replay without the erased events, and a
retirement whose successor no longer exists retires nothing: deleting the newer
memory of a supersede pair, the message behind an automatic retirement or an
item's newest revision leaves the older one current again, unless a successor
that still exists retired it.  Both backends, through the public facade, before
and after the rebuild jobs run.
"""

from __future__ import annotations

from oblivio import MemoryClient
from oblivio.memory.records import ItemRevision
from projections.model import LifecycleState
from tests.memory.test_ingest import USER, claim_of, replay_equal, said


def lifecycle_of(memory: MemoryClient, node_id: object) -> tuple[LifecycleState, object]:
    state = memory.get_assertion_state(node_id, user_id=USER)  # type: ignore[arg-type]
    assert state is not None
    return state.lifecycle, state.superseded_by


def rebuilt(memory: MemoryClient) -> None:
    """Run the erasure's rebuild jobs; replay still equals live after them."""
    memory.context.rebuilder.run_pending()
    replay_equal(memory)


def test_deleting_the_newer_memory_of_a_supersede_pair_reinstates_the_older(
    memory: MemoryClient,
) -> None:
    [old] = memory.get_event_nodes(memory.store("I live in Oslo.", user_id=USER), user_id=USER)
    newer = memory.store("I live in Bergen.", user_id=USER)
    [new] = memory.get_event_nodes(newer, user_id=USER)
    memory.supersede(old.id, new.id, user_id=USER)
    assert lifecycle_of(memory, old.id) == (LifecycleState.SUPERSEDED, new.id)

    memory.delete_event(newer, user_id=USER)
    assert lifecycle_of(memory, old.id) == (LifecycleState.ACTIVE, None)
    replay_equal(memory)
    found = memory.retrieve("Where do I live?", user_id=USER, consistent=True)
    assert [r.node.id for r in found.results] == [old.id]
    rebuilt(memory)
    assert lifecycle_of(memory, old.id) == (LifecycleState.ACTIVE, None)


def test_a_live_successor_keeps_its_predecessor_retired(memory: MemoryClient) -> None:
    """The first successor erased, the older memory is superseded again by a second one:
    it stays retired by the one that exists; erasing that one too reinstates it."""
    [old] = memory.get_event_nodes(memory.store("I live in Oslo.", user_id=USER), user_id=USER)
    first, second = (memory.store(t, user_id=USER) for t in ("Bergen.", "I live in Tromsø."))
    [one] = memory.get_event_nodes(first, user_id=USER)
    [two] = memory.get_event_nodes(second, user_id=USER)
    memory.supersede(old.id, one.id, user_id=USER)
    memory.delete_event(first, user_id=USER)
    memory.supersede(old.id, two.id, user_id=USER)
    assert lifecycle_of(memory, old.id) == (LifecycleState.SUPERSEDED, two.id)
    rebuilt(memory)
    assert lifecycle_of(memory, old.id) == (LifecycleState.SUPERSEDED, two.id)

    memory.delete_event(second, user_id=USER)
    assert lifecycle_of(memory, old.id) == (LifecycleState.ACTIVE, None)
    rebuilt(memory)


def test_deleting_the_message_behind_an_automatic_retirement_reinstates_the_claim(
    memory: MemoryClient,
) -> None:
    pump = said(memory, "I use an insulin pump.")
    stop = said(memory, "I don't use an insulin pump anymore.")
    [claim] = pump.claim_node_ids or ()
    assert lifecycle_of(memory, claim)[0] is LifecycleState.SUPERSEDED
    assert claim_of(memory, pump).valid_to is not None

    memory.delete_event(stop.event_id, user_id=USER)
    assert lifecycle_of(memory, claim) == (LifecycleState.ACTIVE, None)
    assert claim_of(memory, pump).valid_to is None  # its interval is open again
    replay_equal(memory)
    rebuilt(memory)


def test_deleting_an_items_newest_revision_makes_the_previous_one_current(
    memory: MemoryClient,
) -> None:
    first = memory.put_item("city", "I live in Oslo.", user_id=USER)
    second = memory.put_item("city", "I live in Bergen.", user_id=USER)
    memory.delete_event(second.event_id, user_id=USER)

    item = memory.get_item("city", user_id=USER)
    assert item is not None
    assert item.current.id == first.event_id
    [node] = first.node_ids
    assert lifecycle_of(memory, node) == (LifecycleState.ACTIVE, None)
    replay_equal(memory)
    rebuilt(memory)


def test_deleting_an_items_middle_revision_keeps_one_current_value(
    memory: MemoryClient,
) -> None:
    """The revision before the erased one is retired by the one after it, as a
    replay of the item's two remaining puts would have it."""
    first = memory.put_item("city", "I live in Oslo.", user_id=USER)
    second = memory.put_item("city", "I live in Bergen.", user_id=USER)
    third = memory.put_item("city", "I live in Tromsø.", user_id=USER)
    memory.delete_event(second.event_id, user_id=USER)

    item = memory.get_item("city", user_id=USER)
    assert item is not None
    assert item.current.id == third.event_id
    [old] = first.node_ids
    [new] = third.node_ids
    assert lifecycle_of(memory, old) == (LifecycleState.SUPERSEDED, new)
    found = memory.retrieve("Where do I live?", user_id=USER, consistent=True)
    assert [r.node.id for r in found.results] == [new]
    replay_equal(memory)
    rebuilt(memory)
    assert lifecycle_of(memory, old) == (LifecycleState.SUPERSEDED, new)


def put_in(memory: MemoryClient, text: str, year: str) -> ItemRevision:
    return memory.put_item("city", text, user_id=USER, occurred_at=f"{year}-01-01T00:00Z")


def test_erasing_the_latest_value_of_a_backdated_history_leaves_the_one_before_current(
    memory: MemoryClient,
) -> None:
    """Values stored out of order (2020, 2024, then 2022 into the history): erasing 2024
    leaves 2022 current and 2020 ended by it, as storing the two in order would."""
    first = put_in(memory, "I live in Oslo.", "2020")
    latest = put_in(memory, "I live in Bergen.", "2024")
    middle = put_in(memory, "I live in Tromsø.", "2022")
    memory.delete_event(latest.event_id, user_id=USER)

    item = memory.get_item("city", user_id=USER)
    assert item is not None
    assert item.current.id == middle.event_id
    [old], [new] = first.node_ids, middle.node_ids
    assert lifecycle_of(memory, old) == (LifecycleState.SUPERSEDED, new)
    assert lifecycle_of(memory, new) == (LifecycleState.ACTIVE, None)
    replay_equal(memory)
    rebuilt(memory)
    assert lifecycle_of(memory, old) == (LifecycleState.SUPERSEDED, new)


def test_erasing_an_items_first_revision_leaves_the_rest_of_its_history(
    memory: MemoryClient,
) -> None:
    first = memory.put_item("city", "I live in Oslo.", user_id=USER)
    second = memory.put_item("city", "I live in Bergen.", user_id=USER)
    third = memory.put_item("city", "I live in Tromsø.", user_id=USER)
    memory.delete_event(first.event_id, user_id=USER)

    item = memory.get_item("city", user_id=USER)
    assert item is not None
    assert item.revision_ids == (second.event_id, third.event_id)
    [middle], [new] = second.node_ids, third.node_ids
    assert lifecycle_of(memory, middle) == (LifecycleState.SUPERSEDED, new)
    assert lifecycle_of(memory, new) == (LifecycleState.ACTIVE, None)
    replay_equal(memory)
