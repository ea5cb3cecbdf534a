"""OblivioStore beside LangGraph's InMemoryStore: the same operations, the same answers.

The behaviours are those LangGraph's own store tests check
(libs/checkpoint/tests/test_store.py in the langgraph repository): namespace
listing with prefixes, suffixes, wildcards, depth and pages; namespace
validation; get/put/delete, sync and async; filters with operators; query
search with filters, pages and updates.  Each scenario runs on both stores and
the answers are compared wherever the interface promises them (values, keys,
namespaces, which items match); scores and timestamps are each store's own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.store.base import BaseStore, InvalidNamespaceError, PutOp, SearchItem
from langgraph.store.memory import InMemoryStore

from oblivio import MemoryClient
from oblivio.integrations.langgraph import OblivioStore

Scenario = Callable[[BaseStore], Any]


def side_by_side(client: MemoryClient, scenario: Scenario) -> tuple[Any, Any]:
    """The scenario's result on a fresh InMemoryStore and on an OblivioStore."""
    return scenario(InMemoryStore()), scenario(OblivioStore(client, user_segment=0))


def same(client: MemoryClient, scenario: Scenario) -> Any:
    expected, actual = side_by_side(client, scenario)
    assert actual == expected
    return actual


def keys(items: list[SearchItem]) -> list[str]:
    return sorted(item.key for item in items)


def found(items: list[SearchItem]) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    return sorted((item.namespace, item.key, item.value) for item in items)


NAMESPACES = [
    ("a", "b", "c"),
    ("a", "b", "d", "e"),
    ("a", "b", "d", "i"),
    ("a", "b", "f"),
    ("a", "c", "f"),
    ("b", "a", "f"),
    ("users", "123"),
    ("users", "456", "settings"),
    ("admin", "users", "789"),
]


def _fill(store: BaseStore, namespaces: list[tuple[str, ...]]) -> None:
    for i, ns in enumerate(namespaces):
        store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})


def test_list_namespaces(client: MemoryClient) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        _fill(store, NAMESPACES)
        return [
            store.list_namespaces(prefix=("a", "b")),
            store.list_namespaces(suffix=("f",)),
            store.list_namespaces(prefix=("a",), suffix=("f",)),
            store.list_namespaces(prefix=("a", "b"), max_depth=3),
            store.list_namespaces(prefix=("a", "b"), limit=2),
            store.list_namespaces(prefix=("a", "b"), offset=2),
            store.list_namespaces(prefix=("a", "*", "f")),
            store.list_namespaces(suffix=("*", "f")),
            store.list_namespaces(prefix=("nonexistent",)),
            store.list_namespaces(prefix=("users", "123")),
            store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")),
            store.list_namespaces(max_depth=2),
            store.list_namespaces(),
        ]

    answers = same(client, scenario)
    assert answers[0] == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
    ]
    assert answers[3] == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert sorted(answers[-1]) == sorted(NAMESPACES)


def test_list_namespaces_pages_and_empty_store(client: MemoryClient) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        empty = store.list_namespaces()
        for i in range(12):
            store.put(("namespace", f"sub_{i:02d}"), f"id_{i:02d}", {"data": i})
        return [
            empty,
            store.list_namespaces(prefix=("namespace",), limit=5, offset=0),
            store.list_namespaces(prefix=("namespace",), limit=5, offset=5),
            store.list_namespaces(prefix=("namespace",), limit=5, offset=10),
        ]

    answers = same(client, scenario)
    assert answers[0] == []
    assert answers[3] == [("namespace", "sub_10"), ("namespace", "sub_11")]


def test_invalid_namespaces_are_refused_and_valid_ones_round_trip(client: MemoryClient) -> None:
    doc = {"foo": "bar"}

    def scenario(store: BaseStore) -> list[Any]:
        for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
            with pytest.raises(InvalidNamespaceError):
                store.put(bad, "foo", doc)
            with pytest.raises(InvalidNamespaceError):
                asyncio.run(store.aput(bad, "foo", doc))
        seen: list[Any] = []
        store.put(("foo", "langgraph", "foo"), "bar", doc)
        seen.append(store.get(("foo", "langgraph", "foo"), "bar").value)  # type: ignore[union-attr]
        seen.append([i.value for i in store.search(("foo", "langgraph", "foo"), query="bar")])
        store.delete(("foo", "langgraph", "foo"), "bar")
        seen.append(store.get(("foo", "langgraph", "foo"), "bar"))
        # Past the public put API, the reserved root is not checked.
        store.batch([PutOp(("langgraph", "foo"), "bar", doc)])
        seen.append(store.get(("langgraph", "foo"), "bar").value)  # type: ignore[union-attr]
        seen.append([i.value for i in store.search(("langgraph", "foo"))])
        store.delete(("langgraph", "foo"), "bar")
        seen.append(store.get(("langgraph", "foo"), "bar"))
        return seen

    assert same(client, scenario) == [doc, [doc], None, doc, [doc], None]


def test_get_put_update_delete_sync_and_async(client: MemoryClient) -> None:
    async def async_part(store: BaseStore) -> list[Any]:
        await store.aput(("bob", "notes"), "k", {"n": 1})
        await store.aput(("bob", "notes"), "k", {"n": 2})
        got = await store.aget(("bob", "notes"), "k")
        listed = await store.asearch(("bob",))
        spaces = await store.alist_namespaces(prefix=("bob",))
        await store.adelete(("bob", "notes"), "k")
        return [
            got.value if got else None,
            found(listed),
            spaces,
            await store.aget(("bob", "notes"), "k"),
        ]

    def scenario(store: BaseStore) -> list[Any]:
        store.put(("alice", "prefs"), "theme", {"theme": "dark"})
        first = store.get(("alice", "prefs"), "theme")
        store.put(("alice", "prefs"), "theme", {"theme": "light", "size": 12})
        second = store.get(("alice", "prefs"), "theme")
        assert first is not None
        assert second is not None
        assert second.created_at <= second.updated_at
        missing = [store.get(("alice", "prefs"), "other"), store.get(("carol",), "theme")]
        store.delete(("alice", "prefs"), "theme")
        store.delete(("alice", "prefs"), "never-there")
        return [
            first.value,
            second.value,
            second.namespace,
            second.key,
            missing,
            store.get(("alice", "prefs"), "theme"),
            asyncio.run(async_part(store)),
        ]

    answers = same(client, scenario)
    assert answers[1] == {"theme": "light", "size": 12}
    assert answers[-1][0] == {"n": 2}


DOCS = [
    ("doc1", {"text": "red apple", "color": "red", "score": 4.5, "tags": {"kind": "fruit"}}),
    ("doc2", {"text": "red car", "color": "red", "score": 3.0, "tags": {"kind": "vehicle"}}),
    ("doc3", {"text": "green apple", "color": "green", "score": 4.0, "tags": {"kind": "fruit"}}),
    ("doc4", {"text": "blue car", "color": "blue", "score": 3.5, "tags": {"kind": "vehicle"}}),
]

FILTERS: list[dict[str, Any]] = [
    {"color": "red"},
    {"score": {"$gt": 3.2}},
    {"score": {"$gte": 4.0}, "color": "green"},
    {"score": {"$lt": 3.5}},
    {"score": {"$lte": 3.5}},
    {"color": {"$ne": "red"}},
    {"color": {"$eq": "blue"}},
    {"tags": {"kind": "fruit"}},
    {"color": "purple"},
]


def test_search_without_query_filters_like_in_memory(client: MemoryClient) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        for key, value in DOCS:
            store.put(("shop", "items"), key, value)
        store.put(("shop", "other"), "doc5", {"text": "red hat", "color": "red"})
        return [
            *[keys(store.search(("shop", "items"), filter=f)) for f in FILTERS],
            keys(store.search(("shop",), filter={"color": "red"})),
            keys(store.search(("shop", "items"))),
            len(store.search(("shop",), limit=2)),
            len(store.search(("shop",), limit=2, offset=4)),
            keys(store.search(("nobody",))),
        ]

    answers = same(client, scenario)
    assert answers[0] == ["doc1", "doc2"]
    assert answers[1] == ["doc1", "doc3", "doc4"]


def test_query_search_applies_filters_and_pages(client: MemoryClient) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        for key, value in DOCS:
            store.put(("shop",), key, value)
        page1 = store.search(("shop",), query="apple", limit=2)
        page2 = store.search(("shop",), query="apple", limit=2, offset=2)
        assert not {i.key for i in page1} & {i.key for i in page2}
        return [
            keys(store.search(("shop",), query="apple", filter={"color": "red"})),
            keys(store.search(("shop",), query="car", filter={"score": {"$gt": 3.2}})),
            keys(
                store.search(
                    ("shop",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"}
                )
            ),
            keys(page1 + page2),
            keys(store.search(("shop",), query="apple", limit=10)),
        ]

    answers = same(client, scenario)
    assert answers[0] == ["doc1", "doc2"]
    assert answers[-1] == ["doc1", "doc2", "doc3", "doc4"]


def test_query_search_ranks_the_matching_document_first(client: MemoryClient) -> None:
    store = OblivioStore(client, user_segment=0)
    store.put(("user_123", "memories"), "1", {"text": "这是中文"})
    store.put(("user_123", "memories"), "2", {"text": "Это русский"})
    store.put(("user_123", "memories"), "3", {"text": "zany zebra Xerxes"})
    store.put(("user_123", "memories"), "4", {"text": "something about dogs"})
    for key, query in [("1", "这是中文"), ("2", "Это русский"), ("3", "zany zebra Xerxes")]:
        results = store.search(("user_123",), query=query)
        assert results[0].key == key
        assert results[0].score is not None
        assert results[0].score > (results[1].score or 0)

    # An update changes what the key is found by (LangGraph's vector-update test).
    before = store.search(("user_123",), query="zany zebra Xerxes")[0]
    store.put(("user_123", "memories"), "3", {"text": "new text about birds"})
    after = {i.key: i.score for i in store.search(("user_123",), query="zany zebra Xerxes")}
    assert before.score is not None
    assert (after["3"] or 0) < before.score
    assert store.search(("user_123",), query="new text about birds")[0].key == "3"


def test_unindexed_items_are_listed_but_not_ranked(client: MemoryClient) -> None:
    def scenario(store: BaseStore) -> list[str]:
        store.put(("t",), "doc1", {"text": "zany zebra"})
        store.put(("t",), "doc2", {"text": "something about dogs"})
        store.put(("t",), "doc3", {"text": "text about birds"})
        store.put(("t",), "doc4", {"text": "new text about dogs"}, index=False)
        return keys(store.search(("t",)))

    assert same(client, scenario) == ["doc1", "doc2", "doc3", "doc4"]
    # Ranking needs an embedding config on InMemoryStore; on oblivio the
    # unindexed item comes after every ranked one, without a score (as there).
    store = OblivioStore(client, user_segment=0)
    scenario(store)
    assert "doc4" not in keys(store.search(("t",), query="new text about dogs", limit=3))
    last = store.search(("t",), query="new text about dogs", limit=10)[-1]
    assert (last.key, last.score) == ("doc4", None)


def test_index_fields_choose_the_text_that_is_ranked(client: MemoryClient) -> None:
    store = OblivioStore(client, user_segment=0, index={"fields": ["title"]})
    store.put(("u",), "a", {"title": "violin lessons", "body": "tax return"})
    store.put(("u",), "b", {"title": "tax return", "body": "violin lessons"})
    assert store.search(("u",), query="violin lessons")[0].key == "a"
    store.put(("u",), "c", {"title": "x", "body": "violin lessons"}, index=["body"])
    assert store.search(("u",), query="violin lessons", limit=2)[0].key in {"a", "c"}
    assert "b" not in keys(store.search(("u",), query="violin lessons", limit=2))


def test_async_batches_run_concurrently_with_the_same_results(client: MemoryClient) -> None:
    async def scenario_async(store: BaseStore) -> list[Any]:
        await asyncio.gather(
            *[
                store.aput(("async", "test"), f"doc{i}", {"text": f"doc {i}", "i": i})
                for i in range(6)
            ]
        )
        got = await asyncio.gather(*[store.aget(("async", "test"), f"doc{i}") for i in range(6)])
        results = await store.asearch(("async",), filter={"i": {"$gte": 3}})
        await asyncio.gather(*[store.adelete(("async", "test"), f"doc{i}") for i in range(3)])
        return [
            [g.value["i"] for g in got if g],
            keys(results),
            keys(await store.asearch(("async",))),
        ]

    answers = same(client, lambda store: asyncio.run(scenario_async(store)))
    assert answers == [[0, 1, 2, 3, 4, 5], ["doc3", "doc4", "doc5"], ["doc3", "doc4", "doc5"]]


def test_namespace_matching_is_by_whole_literal_segments(client: MemoryClient) -> None:
    # From LangGraph's SQLite store tests: segment boundaries, metacharacters,
    # case and an empty prefix (the InMemoryStore answers the same).
    labels = [
        "foo",
        "foobar",
        "foo2",
        "user_1",
        "userX1",
        "a%b",
        "axxb",
        "star*",
        "starX",
        "q?m",
        "br[ack]et",
        "Foo",
    ]

    def scenario(store: BaseStore) -> list[Any]:
        for label in labels:
            store.put((label,), "k", {"v": label})
            store.put((label, "child"), "k", {"v": label})
        store.put(("uid", "users", "alice"), "k", {"v": 1})
        store.put(("uid", "users", "malice"), "k", {"v": 1})
        store.put(("uid", "a", "b", "alice"), "k", {"v": 1})

        def spaces(prefix: tuple[str, ...]) -> list[tuple[str, ...]]:
            return sorted({i.namespace for i in store.search(prefix, limit=100)})

        return [
            *[spaces((label,)) for label in labels],
            spaces(("fo",)),
            len(store.search((), limit=100)),
            store.list_namespaces(suffix=("alice",)),
            store.list_namespaces(prefix=("uid", "*", "alice")),
            store.list_namespaces(prefix=("uid",)),
            store.list_namespaces(prefix=("star*",)),
        ]

    answers = same(client, scenario)
    assert answers[0] == [("foo",), ("foo", "child")]
    assert answers[len(labels)] == []


def test_filters_take_values_literally(client: MemoryClient) -> None:
    def scenario(store: BaseStore) -> list[Any]:
        # Every item has a price: InMemoryStore's comparisons fail on a missing one.
        store.put(
            ("docs",), "doc1", {"access": "public", "title": "O'Brien's Document", "price": 1e308}
        )
        store.put(("docs",), "doc2", {"access": "private", "active": True, "price": 10})
        store.put(("docs",), "doc3", {"access": "secret", "active": False, "price": -10})
        store.put(("docs",), "doc4", {"access-level": "x", "123abc": "ok", "price": 30})
        return [
            keys(store.search(("docs",), filter=f))
            for f in [
                {"access": "public' OR '1'='1"},
                {"access": "public\x00' OR '1'='1"},
                {"title": "O'Brien's Document"},
                {"active": True},
                {"active": False},
                {"price": {"$lt": float("inf")}},
                {"price": {"$gt": float("-inf")}},
                {"price": {"$eq": float("nan")}},
                {"price": {"$lt": 10**100}},
                {"price": {"$lt": 0}},
                {"access-level": "x"},
                {"123abc": "ok"},
            ]
        ]

    answers = same(client, scenario)
    assert answers[:5] == [[], [], ["doc1"], ["doc2"], ["doc3"]]
    assert answers[5] == ["doc1", "doc2", "doc3", "doc4"]


def test_a_batch_answers_each_operation_in_order(client: MemoryClient) -> None:
    from langgraph.store.base import GetOp, ListNamespacesOp, SearchOp

    def scenario(store: BaseStore) -> list[Any]:
        store.put(("test", "foo"), "key1", {"data": "value1"})
        store.put(("test", "bar"), "key2", {"data": "value2"})
        results = store.batch(
            [
                GetOp(("test", "foo"), "key1"),
                PutOp(("test", "bar"), "key2", {"data": "value2"}),
                SearchOp(("test",), filter={"data": "value1"}),
                ListNamespacesOp(),
                GetOp(("test",), "key3"),
                PutOp(("test",), "key3", {"data": "value3"}),
            ]
        )
        first, put, searched, spaces, missing, _ = results
        return [
            first.value,
            put,
            found(searched),
            spaces,
            missing,  # type: ignore[union-attr]
            store.get(("test",), "key3").value,
        ]  # type: ignore[union-attr]

    assert same(client, scenario) == [
        {"data": "value1"},
        None,
        [(("test", "foo"), "key1", {"data": "value1"})],
        [("test", "bar"), ("test", "foo")],
        None,
        {"data": "value3"},
    ]


def test_concurrent_puts_of_one_key_leave_one_current_revision(client: MemoryClient) -> None:
    store = OblivioStore(client, user_segment=0)

    async def race() -> None:
        await asyncio.gather(*[store.aput(("alice",), "k", {"text": f"v{i}"}) for i in range(4)])

    asyncio.run(race())
    item = store.get(("alice",), "k")
    assert item is not None
    events = client.get_events(user_id="alice")
    assert len(events) == 4
    current = [
        node
        for event in events
        for node in client.get_event_nodes(event.id, user_id="alice")
        if node.superseded_by is None
    ]
    assert len(current) == 1  # every earlier revision was superseded
    assert current[0].content == item.value["text"]
    assert [i.value for i in store.search(("alice",), query="v")] == [item.value]
