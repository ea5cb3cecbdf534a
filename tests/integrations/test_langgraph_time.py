"""OblivioStore and effective time: a value's ``occurred_at`` field is when its
memory took effect; one that names no timezone-aware time is refused, writing nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from oblivio import MemoryClient
from oblivio.errors import InvalidInputError
from oblivio.integrations.langgraph import OblivioStore

NS = ("alice", "memories")


def node_of(client: MemoryClient) -> object:
    [event] = client.get_events(user_id="alice")
    [node] = client.get_event_nodes(event.id, user_id="alice")
    return node


def test_a_values_occurred_at_is_the_memorys_effective_time(client: MemoryClient) -> None:
    store = OblivioStore(client, user_segment=0)

    store.put(NS, "home", {"text": "Alice lives in Boston", "occurred_at": "2022-03-01T00:00:00Z"})

    assert node_of(client).occurred_at == datetime(2022, 3, 1, tzinfo=UTC)  # type: ignore[attr-defined]
    item = store.get(NS, "home")
    assert item is not None
    assert item.value["occurred_at"] == "2022-03-01T00:00:00Z"


def test_the_field_can_be_renamed_or_turned_off(client: MemoryClient) -> None:
    store = OblivioStore(client, user_segment=0, occurred_at_field=None)

    store.put(NS, "home", {"text": "Alice lives in Boston", "occurred_at": "not a time"})

    node = node_of(client)
    assert node.occurred_at == node.created_at  # type: ignore[attr-defined]


@pytest.mark.parametrize("given", ["2022-03-01T00:00:00", "spring", 2022])
def test_a_value_whose_time_has_no_zone_is_refused(client: MemoryClient, given: object) -> None:
    store = OblivioStore(client, user_segment=0)

    with pytest.raises(InvalidInputError, match="occurred_at"):
        store.put(NS, "home", {"text": "Alice lives in Boston", "occurred_at": given})

    assert client.get_events(user_id="alice") == []


def test_a_filtered_search_ranks_every_match_however_far_down(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LangGraph's filter applies inside the ranking: with room for three ranked
    nodes, the one match that six better-ranked items would push out still ranks."""
    from oblivio.integrations import langgraph

    monkeypatch.setattr(langgraph, "RETRIEVE_LIMIT", 3)
    store = OblivioStore(client, user_segment=0)
    for n in range(6):
        store.put(NS, f"tea-{n}", {"text": f"Alice brews green tea number {n}", "kind": "drink"})
    store.put(NS, "walk", {"text": "Alice walks by the river", "kind": "habit", "level": 3})

    [hit] = store.search(("alice",), query="green tea", filter={"kind": "habit"})
    assert hit.key == "walk"
    assert hit.score is not None
    assert store.search(("alice",), query="green tea", filter={"level": {"$gt": 3}}) == []
    [hit] = store.search(("alice",), query="green tea", filter={"level": {"$gte": 3}})
    assert hit.score is not None
