"""What OblivioStore adds to LangGraph's contract: people, corrections, erasure, secrecy."""

from __future__ import annotations

import asyncio
import time

import pytest
import sqlalchemy as sa
from langgraph.store.base import InvalidNamespaceError

from eventstore.backends.postgres import normalise_postgres_url
from oblivio import LifecycleState, MemoryClient
from oblivio.integrations.langgraph import OblivioStore
from oblivio.settings import Settings
from tests.integrations.conftest import Clock


def _certified(client: MemoryClient, status: object) -> dict[str, object]:
    certificate = getattr(status, "certificate", None)
    assert certificate is not None, status
    return client.verify_certificate(certificate, client.jwks())


def test_put_over_a_key_supersedes_and_keeps_both_revisions_in_the_log(
    client: MemoryClient,
) -> None:
    store = OblivioStore(client, user_segment=1)
    store.put(("memories", "alice"), "city", {"text": "I live in Boston"})
    store.put(("memories", "alice"), "city", {"text": "I moved to Chicago"})

    item = store.get(("memories", "alice"), "city")
    assert item is not None
    assert item.value == {"text": "I moved to Chicago"}
    assert item.created_at < item.updated_at
    old, new = client.get_events(user_id="alice")
    [old_node] = client.get_event_nodes(old.id, user_id="alice")
    [new_node] = client.get_event_nodes(new.id, user_id="alice")
    assert old_node.lifecycle is LifecycleState.SUPERSEDED
    assert old_node.superseded_by == new_node.id
    state = client.get_assertion_state(new_node.id, user_id="alice")
    assert state is not None
    assert state.supersedes == [old_node.id]
    # Retrieval (and so query search) sees the correction only; without index
    # fields the text is every string of the value (LangGraph's default, "$").
    found = client.retrieve("Boston", user_id="alice").results
    assert [r.node.content for r in found] == ["I moved to Chicago"]


def test_delete_erases_every_revision_with_a_certificate(client: MemoryClient) -> None:
    store = OblivioStore(client, user_segment=0)
    store.put(("alice", "notes"), "k", {"text": "first"})
    store.put(("alice", "notes"), "k", {"text": "second"})
    store.put(("alice", "notes"), "other", {"text": "stays"})
    first, second, _ = client.get_events(user_id="alice")

    erasures = store.erase(("alice", "notes"), "k")
    assert len(erasures) == 2
    for status in erasures:
        claims = _certified(client, status)
        assert claims["erasure"]["events_erased"] == 1  # type: ignore[index]
        assert claims["subject"]["reference"] == client.subject_ref("alice")  # type: ignore[index]
    assert store.get(("alice", "notes"), "k") is None
    assert client.get_event(first.id) is None
    assert client.get_event(second.id) is None
    assert [i.key for i in store.search(("alice",))] == ["other"]
    assert store.erase(("alice", "notes"), "k") == []


def test_forget_erases_all_of_one_person_and_only_them(client: MemoryClient) -> None:
    store = OblivioStore(client, user_segment=0)
    for user in ("alice", "bob"):
        store.put((user, "memories"), "a", {"text": f"{user} likes tea"})
        store.put((user, "prefs"), "b", {"theme": "dark"})
    assert store.list_namespaces(max_depth=1) == [("alice",), ("bob",)]

    status = store.forget("alice")
    claims = _certified(client, status)
    assert claims["erasure"]["events_erased"] == 2  # type: ignore[index]
    assert claims["subject"]["reference"] == client.subject_ref("alice")  # type: ignore[index]
    assert store.list_namespaces() == [("bob", "memories"), ("bob", "prefs")]
    assert store.get(("alice", "memories"), "a") is None
    assert store.search(("alice",), query="tea") == []
    everyone = store.search((), query="likes tea")
    assert [i.namespace[0] for i in everyone] == ["bob", "bob"]
    assert everyone[0].value == {"text": "bob likes tea"}


def test_ttl_is_retention_expired_items_vanish_and_are_erased(
    client: MemoryClient, clock: Clock
) -> None:
    store = OblivioStore(client, user_segment=0, clock=clock, ttl={"default_ttl": 60})
    store.put(("alice", "cache"), "short", {"v": 1}, ttl=1)
    store.put(("alice", "cache"), "default", {"v": 2})
    store.put(("alice", "cache"), "forever", {"v": 3}, ttl=None)
    clock.advance(minutes=2)
    assert store.get(("alice", "cache"), "short") is None
    assert sorted(i.key for i in store.search(("alice",))) == ["default", "forever"]

    [status] = store.sweep_expired()
    request = _certified(client, status)["request"]
    assert request["reason"] == "ttl_expired"  # type: ignore[index]
    assert request["legal_ground"] == "art5-1-e"  # type: ignore[index]
    clock.advance(minutes=60)
    [status] = store.sweep_expired()
    assert status.status == "completed"
    assert [i.key for i in store.search(("alice",))] == ["forever"]
    assert len(client.get_events(user_id="alice")) == 1
    assert store.sweep_expired() == []


def test_scope_by_configuration_or_by_a_mapped_segment(client: MemoryClient) -> None:
    project = OblivioStore(client, user_segment=0, scope="project")
    project.put(("alice",), "a", {"text": "roadmap"})
    mapped = OblivioStore(client, user_segment=0, scope_segment=1)
    mapped.put(("alice", "session", "chat-1"), "b", {"text": "hello"})
    assert [e.scope.value for e in client.get_events(user_id="alice")] == ["project", "session"]
    with pytest.raises(InvalidNamespaceError, match="not a scope"):
        mapped.put(("alice", "galaxy"), "c", {"text": "x"})
    with pytest.raises(InvalidNamespaceError, match="segment 1"):
        OblivioStore(client, user_segment=1).put(("only-one",), "c", {"text": "x"})
    assert client.get_events(user_id="galaxy") == []
    assert len(client.get_events(user_id="alice")) == 2


def test_bad_values_are_refused_and_write_nothing(client: MemoryClient) -> None:
    store = OblivioStore(client, user_segment=0)
    for bad in [{"x": float("nan")}, {"x": object()}, {1: "x"}]:
        with pytest.raises(ValueError, match="JSON"):
            store.put(("alice",), "k", bad)  # type: ignore[dict-item]
    assert client.get_events(user_id="alice") == []


def test_async_forget_and_search(client: MemoryClient) -> None:
    store = OblivioStore(client, user_segment=0)

    async def scenario() -> None:
        await store.aput(("alice", "m"), "k", {"text": "green tea"})
        assert [i.key for i in await store.asearch(("alice",), query="tea")] == ["k"]
        status = await asyncio.to_thread(store.forget, "alice")
        assert status.status == "completed"
        assert await store.aget(("alice", "m"), "k") is None

    asyncio.run(scenario())


def _database_bytes(settings: Settings) -> bytes:
    """Everything the database holds: the SQLite files, or every PostgreSQL row as text."""
    if settings.database_url is None:
        return b"".join(p.read_bytes() for p in settings.data_dir.rglob("*") if p.is_file())
    engine = sa.create_engine(normalise_postgres_url(settings.database_url))
    with engine.connect() as conn:
        tables = conn.execute(
            sa.text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        ).scalars()
        rows = [
            row
            for table in list(tables)
            for row in conn.execute(
                sa.select(sa.literal_column("t::text")).select_from(sa.table(table).alias("t"))
            ).scalars()
        ]
    engine.dispose()
    return "\n".join(rows).encode()


def test_nothing_personal_reaches_the_database_in_plaintext(settings: Settings) -> None:
    secrets = ["alice-the-user", "secret-folder", "secret-key", "plaintext-value"]
    with MemoryClient(settings=settings) as client:
        store = OblivioStore(client, user_segment=0)
        store.put(("alice-the-user", "secret-folder"), "secret-key", {"v": "plaintext-value"})
        store.put(("alice-the-user", "secret-folder"), "secret-key", {"v": "plaintext-value 2"})
        assert store.list_namespaces() == [("alice-the-user", "secret-folder")]
    raw = _database_bytes(settings)
    assert b"memory.stored" in raw, "the scan sees the database's rows"
    for secret in secrets:
        for form in (secret.encode(), secret.encode("utf-16-le"), secret.encode().hex().encode()):
            assert form not in raw, (secret, form)


def test_the_ttl_sweeper_erases_in_the_background(client: MemoryClient, clock: Clock) -> None:
    store = OblivioStore(client, user_segment=0, clock=clock, ttl={"sweep_interval_minutes": 1})
    store.put(("alice",), "k", {"v": 1}, ttl=1)
    clock.advance(minutes=5)
    store.start_ttl_sweeper(sweep_interval_minutes=0.001)  # every 60 ms
    try:
        deadline = time.monotonic() + 20
        while client.get_events(user_id="alice") and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        store.stop_ttl_sweeper(timeout=20)
    assert client.get_events(user_id="alice") == []


def test_query_search_is_oblivio_retrieval_attractors_and_triggers_apply(
    client: MemoryClient,
) -> None:
    store = OblivioStore(client, user_segment=0, index={"fields": ["text"]})
    store.put(("alice", "food"), "curry", {"text": "I love spicy curry"})
    store.put(("alice", "food"), "cake", {"text": "I love sweet cake"})

    def scores() -> dict[str, float | None]:
        return {i.key: i.score for i in store.search(("alice",), query="I love food")}

    before = scores()
    client.add_negative_attractor("spicy curry", user_id="alice", severity=1.0)
    demoted = scores()
    assert (demoted["curry"] or 0) < (before["curry"] or 0)
    assert demoted["cake"] == pytest.approx(before["cake"])
    client.add_resonance_trigger(user_id="alice", keyword="cake", weight=5.0)
    boosted = scores()
    assert (boosted["cake"] or 0) > (demoted["cake"] or 0)
    assert [i.key for i in store.search(("alice",), query="I love food")] == ["cake", "curry"]
