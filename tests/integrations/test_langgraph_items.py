"""OblivioStore's items: found by a keyed hash, one current revision under races, TTL
refreshed on read, and a scope that stays the item's."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from oblivio import LifecycleState, MemoryClient
from oblivio.errors import ItemScopeConflictError
from oblivio.integrations import documents as docs
from oblivio.integrations.langgraph import OblivioStore
from oblivio.settings import Settings
from tests.integrations.conftest import Clock

NS = ("alice", "memories")


def _item_rows(client: MemoryClient, user: str) -> list[Any]:
    """The rows of ``memory_items`` for the user's stream, as the database holds them."""
    head = client.context.store.head(client.context.namespace, user)
    if head is None:
        return []
    query = sa.text("SELECT item, event_id FROM memory_items WHERE stream_id = :s ORDER BY version")
    with client.context.store.backend.engine.connect() as conn:
        return list(conn.execute(query, {"s": head.stream.stream_id}))


def _current_nodes(client: MemoryClient, user: str) -> list[Any]:
    """Every node of the user that is not superseded (one per current revision)."""
    return [
        node
        for event in client.get_events(user_id=user, limit=1000)
        for node in client.get_event_nodes(event.id, user_id=user)
        if node.lifecycle is not LifecycleState.SUPERSEDED
    ]


def _value(event: Any) -> Any:
    return json.loads(event.meta[docs.VALUE])


def _replay_equal(client: MemoryClient, user: str) -> None:
    for name, (live, replayed) in client.replay_comparison(user_id=user).items():
        assert live == replayed, name


def test_items_are_indexed_by_a_keyed_hash_and_erasure_leaves_no_entry(
    client: MemoryClient,
) -> None:
    store = OblivioStore(client, user_segment=0)
    store.put(NS, "city", {"text": "Boston"})
    store.put(NS, "city", {"text": "Chicago"})
    store.put(NS, "drink", {"text": "tea"})
    rows = _item_rows(client, "alice")
    assert len(rows) == 3  # one row per revision
    city = docs.locator(client.subject_ref("alice"), NS, "city")
    assert len({bytes(r.item) for r in rows}) == 2
    for row in rows:  # neither the locator nor anything derivable without the key
        assert len(row.item) == 32
        assert bytes(row.item).hex() != city
    _replay_equal(client, "alice")

    store.erase(NS, "city")
    assert [r.event_id for r in _item_rows(client, "alice")] == [rows[2].event_id]
    assert store.get(NS, "city") is None
    assert store.get(NS, "drink") is not None
    _replay_equal(client, "alice")

    store.forget("alice")
    assert _item_rows(client, "alice") == []


# -- items written before the index (pj0006): derived on first use --------------------


def _written_before_the_index(client: MemoryClient) -> None:
    """The store as the migrations leave one written before them: no item or
    dependency rows, and every stream with nodes marked (the statement of pj0008)."""
    with client.context.store.backend.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM memory_items"))
        conn.execute(sa.text("DELETE FROM memory_node_refs"))
        conn.execute(
            sa.text(
                "INSERT INTO memory_graph_backfills (stream_id) "
                "SELECT DISTINCT stream_id FROM memory_nodes"
            )
        )


def test_items_written_with_the_index_emptied_are_found_on_first_use(
    client: MemoryClient,
) -> None:
    store = OblivioStore(client, user_segment=0)
    for key, text in (("city", "Boston"), ("city", "Chicago"), ("drink", "tea")):
        store.put(NS, key, {"text": text}, ttl=10)
    indexed = _item_rows(client, "alice")
    _written_before_the_index(client)
    assert _item_rows(client, "alice") == []
    item = store.get(NS, "city", refresh_ttl=False)
    assert item is not None
    assert item.value == {"text": "Chicago"}
    assert _item_rows(client, "alice") == indexed  # the rows a replay derives
    _replay_equal(client, "alice")
    store.put(NS, "city", {"text": "Denver"})  # supersedes the current revision
    current = sorted(n.content for n in _current_nodes(client, "alice"))
    assert current == ["Denver", "tea"]
    store.delete(NS, "drink")
    assert [i.key for i in store.search(NS)] == ["city"]
    _replay_equal(client, "alice")


def test_items_of_the_first_oblivio_store_layout_are_items(client: MemoryClient) -> None:
    # Before the index, OblivioStore stored a revision with store() and named the
    # item in its metadata only (doc.locator, doc.expires_at); put over a key
    # superseded the previous revision explicitly.
    ref = client.subject_ref("alice")

    def legacy_put(key: str, value: dict[str, Any], expires_at: str | None = None) -> str:
        meta = docs.document_meta(ref, NS, key, value, indexed=True, ttl=None)
        del meta[docs.TTL]
        meta["doc.expires_at"] = expires_at
        event_id = client.store(json.dumps(value), user_id="alice", meta=meta)
        return str(event_id)

    first = legacy_put("city", {"text": "Boston"})
    second = legacy_put("city", {"text": "Chicago"})
    [old] = client.get_event_nodes(first, user_id="alice")
    [new] = client.get_event_nodes(second, user_id="alice")
    client.supersede(old.id, new.id, user_id="alice")
    legacy_put("drink", {"text": "tea"}, expires_at="2000-01-01T00:00:00+00:00")
    _written_before_the_index(client)

    store = OblivioStore(client, user_segment=0)
    item = store.get(NS, "city")
    assert item is not None
    assert item.value == {"text": "Chicago"}
    assert store.get(NS, "drink") is None  # expired long ago
    assert len(store.sweep_expired()) == 1
    _replay_equal(client, "alice")  # a replay derives the same rows
    store.put(NS, "city", {"text": "Denver"})
    assert [n.content for n in _current_nodes(client, "alice")] == ["Denver"]
    assert [s.events_erased for s in store.erase(NS, "city")] == [1, 1, 1]
    assert store.search(NS) == []
    _replay_equal(client, "alice")


def test_deleting_the_current_revision_by_event_makes_the_previous_one_current(
    client: MemoryClient,
) -> None:
    store = OblivioStore(client, user_segment=0)
    store.put(NS, "city", {"text": "Boston"})
    store.put(NS, "city", {"text": "Chicago"})
    _first, second = client.get_events(user_id="alice")
    client.delete_event(second.id, user_id="alice", wait=True)
    item = store.get(NS, "city")
    assert item is not None
    assert item.value == {"text": "Boston"}
    _replay_equal(client, "alice")


def test_racing_puts_of_one_key_in_threads_leave_one_current_revision(
    client: MemoryClient,
) -> None:
    # Two stores over one client: nothing in-process serialises them.
    stores = [OblivioStore(client, user_segment=0), OblivioStore(client, user_segment=0)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        barrier.wait()
        try:
            for i in range(8):
                stores[n].put(NS, "k", {"text": f"writer {n} value {i}"})
        except BaseException as e:  # reported below, not lost in the thread
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    revisions = client.get_events(user_id="alice")
    [node] = _current_nodes(client, "alice")
    assert node.event_id == revisions[-1].id
    item = stores[0].get(NS, "k")
    assert item is not None
    assert item.value == _value(revisions[-1])
    assert len(_item_rows(client, "alice")) == 16


def _put_many(settings: Settings, writer: int, start: Any) -> None:
    with MemoryClient(settings=settings) as client:
        store = OblivioStore(client, user_segment=0)
        start.wait()
        for i in range(8):
            store.put(NS, "k", {"text": f"process {writer} value {i}"})


@pytest.mark.postgres
def test_racing_puts_of_one_key_in_two_processes_leave_one_current_revision(
    module_postgres: tuple[str, Path], tmp_path: Path
) -> None:
    url, keyring = module_postgres
    settings = Settings(
        data_dir=tmp_path / "memory", database_url=url, keyring_path=keyring, namespace="race"
    )
    spawn = multiprocessing.get_context("spawn")
    start = spawn.Event()
    workers = [spawn.Process(target=_put_many, args=(settings, n, start)) for n in (0, 1)]
    for w in workers:
        w.start()
    start.set()
    for w in workers:
        w.join(120)
    assert [w.exitcode for w in workers] == [0, 0]
    with MemoryClient(settings=settings) as client:
        revisions = client.get_events(user_id="alice", limit=1000)
        assert len(revisions) == 16
        [node] = _current_nodes(client, "alice")
        assert node.event_id == revisions[-1].id
        item = OblivioStore(client, user_segment=0).get(NS, "k")
        assert item is not None
        assert item.value == _value(revisions[-1])
        _replay_equal(client, "alice")


def test_a_put_in_another_scope_is_refused_and_writes_nothing(client: MemoryClient) -> None:
    OblivioStore(client, user_segment=0, scope="project").put(NS, "k", {"text": "roadmap"})
    personal = OblivioStore(client, user_segment=0)
    with pytest.raises(ItemScopeConflictError, match="scope 'project'"):
        personal.put(NS, "k", {"text": "diary"})
    assert len(client.get_events(user_id="alice")) == 1
    item = personal.get(NS, "k")
    assert item is not None
    assert item.value == {"text": "roadmap"}
    # Deleting the item first moves it to the other scope.
    personal.delete(NS, "k")
    personal.put(NS, "k", {"text": "diary"})
    assert [e.scope.value for e in client.get_events(user_id="alice")] == ["personal"]


# -- TTL refreshed on read: LangGraph's test_store_ttl (checkpoint-postgres), on a clock --


def test_reads_with_refresh_ttl_extend_the_ttl_and_reads_without_do_not(
    client: MemoryClient, clock: Clock
) -> None:
    store = OblivioStore(client, user_segment=0, clock=clock, index={"fields": ["foo"]})
    store.put(("foo",), "item1", {"foo": "bar"}, ttl=1)
    clock.advance(seconds=58)
    assert store.get(("foo",), "item1", refresh_ttl=True) is not None
    clock.advance(seconds=58)
    assert len(store.search(("foo",), query="foo", refresh_ttl=True)) == 1
    clock.advance(seconds=58)
    assert store.get(("foo",), "item1", refresh_ttl=False) is not None
    clock.advance(seconds=59)  # 117 s since the last refresh
    assert store.search(("foo",), query="bar", refresh_ttl=False) == []
    assert store.get(("foo",), "item1", refresh_ttl=True) is None  # expired stays expired
    _replay_equal(client, "foo")  # the refreshes are events, and replay


def test_a_search_refreshes_its_page_in_one_transaction(
    client: MemoryClient, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = OblivioStore(client, user_segment=0, clock=clock)
    for key in ("a", "b", "c"):
        store.put(NS, key, {"v": key}, ttl=1)
    store.put(NS, "forever", {"v": "no ttl"})
    real = client.context.store.transaction
    opened: list[object] = []

    def counted() -> Any:
        opened.append(None)
        return real()

    monkeypatch.setattr(client.context.store, "transaction", counted)
    clock.advance(seconds=50)
    assert sorted(i.key for i in store.search(NS, refresh_ttl=True)) == ["a", "b", "c", "forever"]
    assert len(opened) == 1  # three refreshes, one transaction (the TTL-less item writes none)
    monkeypatch.undo()
    clock.advance(seconds=50)  # 100 s after the put, 50 s after the refresh
    assert sorted(i.key for i in store.search(NS, refresh_ttl=False)) == ["a", "b", "c", "forever"]
    clock.advance(seconds=11)
    assert [i.key for i in store.search(NS, refresh_ttl=False)] == ["forever"]
    _replay_equal(client, "alice")


def test_refresh_on_read_follows_the_ttl_config_and_the_call(
    client: MemoryClient, clock: Clock
) -> None:
    store = OblivioStore(
        client, user_segment=0, clock=clock, ttl={"refresh_on_read": False, "default_ttl": 1}
    )
    store.put(NS, "k", {"v": 1})
    events = len(client.get_events(user_id="alice"))
    clock.advance(seconds=50)
    assert store.get(NS, "k") is not None  # the config says: no refresh
    clock.advance(seconds=20)
    assert store.get(NS, "k") is None
    store.put(NS, "k", {"v": 2})
    clock.advance(seconds=50)
    assert [i.key for i in store.search(("alice",), refresh_ttl=True)] == ["k"]
    clock.advance(seconds=50)
    assert store.get(NS, "k") is not None
    assert len(client.get_events(user_id="alice")) == events + 1  # the refresh is no memory


def test_a_query_search_pages_through_the_ranking_as_the_listing_does(
    client: MemoryClient,
) -> None:
    """The ranked path (the page's documents read by key) answers what the listing of
    every document answers, for prefixes, filters, pages and TTLs."""
    store = OblivioStore(client, user_segment=1)
    for i in range(30):
        colour = ("red", "green", "blue")[i % 3]
        namespace = ("memories", "ada", "work" if i % 2 else "home")
        store.put(namespace, f"k{i}", {"text": f"fruit {colour} number {i}", "n": i})
    store.put(("memories", "ada", "home"), "soon", {"text": "fruit red gone"}, ttl=0.0001)
    store.put(("memories", "ada", "home"), "raw", {"text": "fruit raw"}, index=False)
    listed = OblivioStore(client, user_segment=1)
    listed._ranked_page = lambda op: None  # type: ignore[method-assign]
    for prefix, query_filter, offset, limit in (
        (("memories", "ada"), None, 0, 5),
        (("memories", "ada", "work"), None, 3, 4),
        (("memories", "ada"), {"n": {"$gte": 20}}, 0, 10),
        (("memories",), {"text": "fruit red number 3"}, 0, 3),
        (("memories", "ada"), None, 28, 5),  # past the ranked documents: the unindexed
        (("memories", "*", "home"), None, 0, 5),  # a wildcard: tested on the ranked nodes
        (("memories", "ada", "wo"), None, 0, 5),  # a segment's prefix is no namespace
    ):
        args = {"query": "red fruit", "filter": query_filter, "offset": offset, "limit": limit}
        ranked = store.search(prefix, **args)
        expected = listed.search(prefix, **args)
        # Scores move a little between calls (recency, and each answer's access counts).
        assert [i.key for i in ranked] == [i.key for i in expected], args
        assert [i.score for i in ranked] == [
            None if i.score is None else pytest.approx(i.score, rel=1e-3) for i in expected
        ]
        assert "soon" not in {i.key for i in ranked}


def test_a_query_search_in_a_small_namespace_lists_nothing(
    client: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The namespace prefix is a filter of the retrieval itself: the person's documents
    in other namespaces neither crowd the ranking nor send the search to a listing of
    every document; documents kept out of the index follow the ranked ones."""
    store = OblivioStore(client, user_segment=1)
    for i in range(40):
        store.put(("memories", "ada"), f"m{i}", {"text": f"fruit basket {i}"})
    store.put(("profiles", "ada"), "other", {"text": "fruit elsewhere"})
    store.put(("profile", "ada"), "name", {"text": "fruit name Ada"})
    store.put(("profile", "ada", "deeper"), "deep", {"text": "fruit deeper down"})
    store.put(("profile", "ada"), "raw", {"text": "fruit raw"}, index=False)
    listings: list[dict[str, object]] = []
    read = client.list_items

    def counted(**kwargs: Any) -> Any:
        if kwargs.get("keys") is None:
            listings.append(kwargs)
        return read(**kwargs)

    monkeypatch.setattr(client, "list_items", counted)
    found = store.search(("profile", "ada"), query="fruit name", limit=10)
    assert sorted(i.key for i in found[:2]) == ["deep", "name"]
    assert [(i.key, i.score) for i in found[2:]] == [("raw", None)]
    assert listings == []


def test_a_query_search_lists_archived_items_after_the_ranked_ones(client: MemoryClient) -> None:
    """Archiving (past the retrieval tier's capacity) leaves an item live: a page the
    ranked items do not fill lists it without a score, as the listing of every item does."""
    from tests.erasure._support import stream_id_of
    from workers.archiving import Archiver

    store = OblivioStore(client, user_segment=1)
    for i, text in enumerate(("fruit tea", "fruit dog", "fruit car", "fruit town")):
        store.put(("notes", "archie"), f"k{i}", {"text": text})
    ctx = client.context
    archiver = Archiver(ctx.store, ctx.graph, ctx.scoring, 2, lambda: ctx.clock())
    assert archiver.archive_stream(stream_id_of(client, "archie")) == (2, 0)
    listed = OblivioStore(client, user_segment=1)
    listed._ranked_page = lambda op: None  # type: ignore[method-assign]

    found = store.search(("notes", "archie"), query="fruit", limit=10)
    assert [i.score is None for i in found] == [False, False, True, True]
    expected = listed.search(("notes", "archie"), query="fruit")
    assert [i.key for i in found] == [i.key for i in expected]
