"""Keyed items on the facade: put_item, get_item, list_items, set_item_expiry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from eventstore import InvalidInputError
from oblivio import LifecycleState, MemoryClient
from oblivio.errors import ItemScopeConflictError


def test_a_revision_supersedes_the_current_one_and_get_item_returns_it(
    memory: MemoryClient,
) -> None:
    first = memory.put_item("city", "I live in Boston.", user_id="ann", meta={"src": "chat"})
    second = memory.put_item("city", "I moved to Chicago.", user_id="ann")
    assert first.replaced == ()
    assert second.replaced == (first.event_id,)
    [old] = memory.get_event_nodes(first.event_id, user_id="ann")
    assert old.lifecycle is LifecycleState.SUPERSEDED
    assert old.superseded_by == second.node_ids[0]
    item = memory.get_item("city", user_id="ann")
    assert item is not None
    assert item.key == "city"
    assert item.current.content == "I moved to Chicago."
    assert item.revision_ids == (first.event_id, second.event_id)
    assert item.created_at < item.current.recorded_at
    assert memory.get_item("city", user_id="bob") is None
    assert memory.get_item("town", user_id="ann") is None


def test_expiry_is_recorded_moved_and_replayed(memory: MemoryClient) -> None:
    soon = datetime.now(UTC) + timedelta(minutes=5)
    memory.put_item("k", "cached", user_id="ann", expires_at=soon)
    item = memory.get_item("k", user_id="ann")
    assert item is not None
    assert item.expires_at == soon
    later = soon + timedelta(hours=1)
    assert memory.set_item_expiry("k", later, user_id="ann") is True
    assert memory.set_item_expiry("missing", later, user_id="ann") is False
    assert memory.set_item_expiry("k", later, user_id="nobody") is False
    [listed] = memory.list_items(user_id="ann")
    assert listed.expires_at == later
    memory.put_item("j", "also cached", user_id="ann")
    moved = {"k": soon, "j": later, "missing": later}
    assert memory.set_item_expiries(moved, user_id="ann") == {"k", "j"}
    listed_expiries = {i.key: i.expires_at for i in memory.list_items(user_id="ann")}
    assert listed_expiries == {"k": soon, "j": later}
    for name, (live, replayed) in memory.replay_comparison(user_id="ann").items():
        assert live == replayed, name


def test_bad_items_are_refused_and_write_nothing(memory: MemoryClient) -> None:
    memory.put_item("k", "personal", user_id="ann")
    naive = datetime.now() + timedelta(minutes=1)  # naive: the refused input
    for bad in (
        lambda: memory.put_item("", "x", user_id="ann"),
        lambda: memory.put_item("k" * 257, "x", user_id="ann"),
        lambda: memory.put_item("k", "", user_id="ann"),
        lambda: memory.put_item("k", "x", user_id="ann", expires_at=naive),
        lambda: memory.set_item_expiry("k", naive, user_id="ann"),
    ):
        with pytest.raises(InvalidInputError):
            bad()
    with pytest.raises(ItemScopeConflictError):
        memory.put_item("k", "work", user_id="ann", scope="project")
    assert [e.content for e in memory.get_events(user_id="ann")] == ["personal"]


def test_list_items_with_keys_reads_those_items_only(memory: MemoryClient) -> None:
    for key in ("a", "b", "c"):
        memory.put_item(key, f"value {key}", user_id="ann")
    memory.put_item("b", "value b, revised", user_id="ann")
    found = {i.key: i for i in memory.list_items(user_id="ann", keys=["b", "c", "missing", "b"])}
    assert set(found) == {"b", "c"}
    assert found["b"] == memory.get_item("b", user_id="ann")
    assert memory.list_items(user_id="nobody", keys=["a"]) == []
    for bad in ("a", [], ["a", ""], ["k" * 257], ["x"] * 1001, [1]):
        with pytest.raises(InvalidInputError):
            memory.list_items(user_id="ann", keys=bad)  # type: ignore[arg-type]
