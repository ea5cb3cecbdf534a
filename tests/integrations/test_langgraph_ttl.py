"""OblivioStore's TTL beside LangGraph's InMemoryStore, on a clock the test moves.

The scenarios are LangGraph's own TTL tests (langgraph repository:
libs/checkpoint-postgres/tests/test_store.py ``test_store_ttl`` and
``test_omit_expired_refresh_ttl_only_refreshes_live_rows``,
libs/checkpoint-sqlite/tests/test_ttl.py: basic expiry, refresh on read,
per-item TTLs, a default TTL overridden per item, search after expiry, the
async variants), their sleeps replaced by moves of the clock.

InMemoryStore has no TTL (``supports_ttl`` is false: a put with a ttl raises
``NotImplementedError``), so it gets the same operations without TTLs and
keeps everything.  Every answer of OblivioStore must then be InMemoryStore's
answer less the items the scenario says have expired by then: the same
values, keys, namespaces and matches, and nothing that expired, swept or not.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.store.base import Item, TTLConfig
from langgraph.store.memory import InMemoryStore

from oblivio import MemoryClient
from oblivio.integrations.langgraph import OblivioStore
from tests.integrations.conftest import Clock

NS = ("test",)
Address = tuple[tuple[str, ...], str]


def _seen(item: Item | None) -> tuple[tuple[str, ...], str, dict[str, Any]] | None:
    return None if item is None else (item.namespace, item.key, item.value)


class Twins:
    """The same operations on an OblivioStore (with TTLs) and an InMemoryStore (without)."""

    def __init__(self, client: MemoryClient, clock: Clock, ttl: TTLConfig | None = None) -> None:
        self.ours = OblivioStore(client, user_segment=0, clock=clock, ttl=ttl)
        self.reference = InMemoryStore()
        self.clock = clock
        self.expired: set[Address] = set()
        self.swept: set[Address] = set()

    def put(self, key: str, value: dict[str, Any], **ttl: Any) -> None:
        self.ours.put(NS, key, value, **ttl)
        self.reference.put(NS, key, value)

    def wait(self, seconds: float, *, expired: tuple[str, ...] = ()) -> None:
        """Move the clock; ``expired`` names the keys whose TTL has passed by then."""
        self.clock.advance(seconds=seconds)
        self.expired |= {(NS, key) for key in expired}

    def get(self, key: str, **options: Any) -> Item | None:
        ours = self.ours.get(NS, key, **options)
        theirs = self.reference.get(NS, key, **options)
        assert _seen(ours) == (None if (NS, key) in self.expired else _seen(theirs))
        return ours

    def search(self, **options: Any) -> list[str]:
        ours = self.ours.search(NS, **options)
        theirs = self.reference.search(NS, **options)
        live = [i for i in theirs if (i.namespace, i.key) not in self.expired]
        assert sorted(map(_seen, ours)) == sorted(map(_seen, live))  # type: ignore[type-var]
        assert self.ours.list_namespaces() == sorted({i.namespace for i in live})
        return sorted(i.key for i in ours)

    def sweep(self) -> int:
        """Sweep: it erases exactly the items that expired since the last sweep."""
        erased = self.ours.sweep_expired()
        assert len(erased) == len(self.expired - self.swept)
        assert all(status.certificate is not None for status in erased)
        self.swept |= self.expired
        return len(erased)


@pytest.fixture
def twins(client: MemoryClient, clock: Clock) -> Twins:
    return Twins(client, clock)


def test_store_ttl(client: MemoryClient, clock: Clock) -> None:
    # checkpoint-postgres test_store_ttl: a TTL of one minute, refreshed by reads.
    twins = Twins(client, clock)
    twins.put("item1", {"foo": "bar"}, ttl=1)
    twins.wait(58)
    assert twins.get("item1", refresh_ttl=True) is not None
    twins.wait(58)
    assert twins.search(query="foo", refresh_ttl=True) == ["item1"]
    twins.wait(58)
    assert twins.get("item1", refresh_ttl=False) is not None
    twins.wait(59, expired=("item1",))  # 117 s since the last refresh
    assert twins.search(query="bar", refresh_ttl=False) == []
    assert twins.get("item1", refresh_ttl=True) is None  # a read does not bring it back
    assert twins.sweep() == 1


def test_ttl_basic(client: MemoryClient, clock: Clock) -> None:
    twins = Twins(client, clock, {"default_ttl": 1 / 60})
    twins.put("item1", {"value": "test"})
    assert twins.get("item1") is not None
    twins.wait(2, expired=("item1",))
    assert twins.sweep() == 1
    assert twins.get("item1") is None


def test_ttl_refresh(client: MemoryClient, clock: Clock) -> None:
    twins = Twins(client, clock, {"default_ttl": 1 / 60, "refresh_on_read": True})
    twins.put("item1", {"value": "test"})
    twins.wait(0.5)
    assert twins.sweep() == 0
    assert twins.get("item1", refresh_ttl=True) is not None
    twins.wait(0.5)
    assert twins.sweep() == 0
    assert twins.get("item1") is not None  # refresh_on_read: this read refreshes too
    twins.wait(1.75, expired=("item1",))
    assert twins.sweep() == 1
    assert twins.get("item1") is None


def test_ttl_custom_value(twins: Twins) -> None:
    twins.put("item1", {"value": "short"}, ttl=1 / 60)
    twins.put("item2", {"value": "long"}, ttl=3 / 60)
    twins.wait(2, expired=("item1",))
    twins.sweep()
    assert twins.get("item1") is None
    assert twins.get("item2") is not None  # refreshed on read (the default)
    twins.wait(4, expired=("item2",))
    twins.sweep()
    assert twins.get("item2") is None


def test_ttl_override_default(client: MemoryClient, clock: Clock) -> None:
    twins = Twins(client, clock, {"default_ttl": 5 / 60, "refresh_on_read": False})
    twins.put("item1", {"value": "override"}, ttl=1 / 60)
    twins.put("item2", {"value": "default"})
    twins.put("item3", {"value": "permanent"}, ttl=None)
    twins.wait(2, expired=("item1",))
    twins.sweep()
    assert twins.get("item1") is None
    assert twins.get("item2") is not None
    assert twins.get("item3") is not None
    twins.wait(4, expired=("item2",))
    twins.sweep()
    assert twins.get("item2") is None
    assert twins.get("item3") is not None


def test_search_with_ttl(client: MemoryClient, clock: Clock) -> None:
    twins = Twins(client, clock, {"default_ttl": 1 / 60})
    twins.put("item1", {"value": "apple"})
    twins.put("item2", {"value": "banana"})
    assert twins.search(filter={"value": "apple"}) == ["item1"]
    twins.wait(2, expired=("item1", "item2"))
    assert twins.search(filter={"value": "apple"}) == []  # expired, not yet swept
    assert twins.sweep() == 2
    assert twins.search() == []


def test_refresh_ttl_only_refreshes_live_items(twins: Twins) -> None:
    # checkpoint-postgres test_omit_expired_refresh_ttl_only_refreshes_live_rows.
    twins.put("expired", {"n": 0}, ttl=1)
    twins.wait(30)
    twins.put("live_get", {"n": 1}, ttl=1)
    twins.put("live_search", {"n": 2}, ttl=1)
    twins.wait(31, expired=("expired",))
    assert twins.get("expired", refresh_ttl=True) is None  # not resurrected
    assert twins.search(refresh_ttl=True) == ["live_get", "live_search"]
    assert twins.get("live_get", refresh_ttl=True) is not None
    twins.wait(40)  # 71 s since the puts, 40 s since the refreshes
    assert twins.search(refresh_ttl=False) == ["live_get", "live_search"]
    assert twins.sweep() == 1


async def test_async_ttl_refresh_and_search(client: MemoryClient, clock: Clock) -> None:
    # checkpoint-sqlite test_async_ttl_refresh / test_async_asearch_refresh_ttl.
    store = OblivioStore(client, user_segment=0, clock=clock, ttl={"default_ttl": 1 / 60})
    reference = InMemoryStore()
    for each in (store, reference):
        await each.aput(NS, "item1", {"value": "test"})
    clock.advance(seconds=0.75)
    for each in (store, reference):
        assert [i.key for i in await each.asearch(NS, refresh_ttl=True)] == ["item1"]
    clock.advance(seconds=0.75)  # 1.5 s after the put, 0.75 s after the refresh
    ours = await store.aget(NS, "item1", refresh_ttl=False)
    assert _seen(ours) == _seen(await reference.aget(NS, "item1", refresh_ttl=False))
    clock.advance(seconds=0.5)  # 1.25 s after the refresh
    assert await store.aget(NS, "item1") is None
    assert await reference.aget(NS, "item1") is not None  # InMemoryStore keeps it
    assert len(store.sweep_expired()) == 1
