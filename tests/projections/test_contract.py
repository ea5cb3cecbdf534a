"""What every projection of the registry must do (projections/base.py), checked for each
one the composition root registers, on both backends.

A new projection gets these tests by being registered: they name none.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from oblivio import MemoryClient
from projections import base
from projections.base import Projection, compose_digests, replay
from projections.parts import reach
from tests.memory.test_ingest import said

USER = "sam"


def names(client: MemoryClient) -> list[str]:
    return [p.name for p in client.context.projections]


@pytest.fixture
def written(memory: MemoryClient) -> tuple[MemoryClient, int]:
    """A subject whose log holds every kind of memory event, applied by every projection."""
    [old] = memory.get_event_nodes(memory.store("I live in Oslo.", user_id=USER), user_id=USER)
    newer = memory.store("I live in Bergen.", user_id=USER)
    [new] = memory.get_event_nodes(newer, user_id=USER)
    memory.supersede(old.id, new.id, user_id=USER)
    memory.reinforce(new.id, user_id=USER)
    memory.put_item("editor", "I use Vim.", user_id=USER)
    said(memory, "I use an insulin pump.")
    said(memory, "I don't use an insulin pump anymore.")
    memory.add_resonance_trigger(user_id=USER, text="a flat in Bergen", weight=2.0)
    memory.add_negative_attractor("spam offers", user_id=USER)
    stream_id = memory.context.retrieval.wait(memory.context.namespace, USER, 60)
    assert stream_id is not None
    return memory, stream_id


def each(client: MemoryClient) -> Iterator[Projection]:
    projections = list(client.context.projections)
    assert len(projections) >= 2  # the node graph and the vector state at least
    yield from projections


def digests(client: MemoryClient, projection: Projection, stream_id: int) -> tuple[str, list[str]]:
    with client.context.store.reading() as view:
        return projection.digest(view, stream_id), projection.item_digests(view, stream_id)


def test_a_digest_composes_its_items_in_any_order(written: tuple[MemoryClient, int]) -> None:
    client, stream_id = written
    for projection in each(client):
        digest, items = digests(client, projection, stream_id)
        assert items, projection.name
        assert digest == compose_digests(items) == compose_digests(reversed(items))
        assert compose_digests(items[1:]) != digest  # every item counts


def test_replay_equals_incremental_in_any_page_size(
    written: tuple[MemoryClient, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``apply_page`` leaves what applying events one by one leaves: a replay in pages of
    one and in pages of many give the live digest."""
    client, stream_id = written
    for page_size in (1, 3, base.REPLAY_PAGE):
        monkeypatch.setattr(base, "REPLAY_PAGE", page_size)
        for projection in each(client):
            live, _ = digests(client, projection, stream_id)
            with client.context.store.transaction() as tx:
                tx.lock_stream(stream_id)
                savepoint = tx.connection.begin_nested()
                replay(tx, [projection], stream_id)
                fresh = projection.digest(tx, stream_id)
                savepoint.rollback()
            assert fresh == live, (projection.name, page_size)


def test_purge_leaves_no_item_of_the_subject(written: tuple[MemoryClient, int]) -> None:
    client, stream_id = written
    for projection in each(client):
        with client.context.store.transaction() as tx:
            savepoint = tx.connection.begin_nested()
            projection.purge(tx.connection, stream_id)
            assert projection.item_digests(tx, stream_id) == []
            savepoint.rollback()
        assert digests(client, projection, stream_id)[1], "the purge was rolled back"


def test_purge_events_leaves_only_what_a_replay_without_them_gives(
    written: tuple[MemoryClient, int],
) -> None:
    """Called as the eraser calls it (after the tombstone, in its transaction),
    ``purge_events`` leaves no item that a replay of the remaining events lacks: an
    inline projection is that replay at once; an asynchronous one may still lack items
    the rebuild job then derives, but holds nothing of the erased event."""
    client, stream_id = written
    ctx = client.context
    stored = [e for e in ctx.store.read_stream(ctx.namespace, USER) if e.type == "memory.stored"]
    erased = stored[1]  # the newer memory of the supersede pair
    with ctx.store.transaction() as tx:
        tx.lock_stream(stream_id)
        ctx.projections.hold(tx.connection, stream_id)
        tx.tombstone(stream_id, [erased.event_id], uuid.uuid4())
        for projection in each(client):
            projection.purge_events(tx, stream_id, [erased])
            left = set(projection.item_digests(tx, stream_id))
            savepoint = tx.connection.begin_nested()
            replay(tx, [projection], stream_id)
            fresh = set(projection.item_digests(tx, stream_id))
            savepoint.rollback()
            assert left <= fresh, projection.name
            if projection is ctx.graph:
                assert left == fresh
    assert client.get_event_nodes(erased.event_id) == []


def test_the_registry_names_each_projection_once(memory: MemoryClient) -> None:
    registry = memory.context.projections
    assert len(set(names(memory))) == len(registry) == len(names(memory))
    for projection in registry:
        assert registry.named(projection.name) is projection
    assert sorted(registry.versions()) == sorted((p.name, p.version) for p in registry)
    with pytest.raises(KeyError):
        registry.named("no such projection")


def test_a_parts_items_are_the_items_anchored_in_it_and_replay_part_rebuilds_them(
    written: tuple[MemoryClient, int],
) -> None:
    """``anchored_digests`` of a closed part are exactly the stream's items anchored in it,
    and ``replay_part`` (where it bounds the replay) leaves the part as a replay does."""
    client, stream_id = written
    ctx = client.context
    stored = [e for e in ctx.store.read_stream(ctx.namespace, USER) if e.type == "memory.stored"]
    with ctx.store.transaction() as tx:
        tx.lock_stream(stream_id)
        part = reach(tx.connection, stream_id, [stored[0].event_id])
        assert stored[1].event_id in part.events  # reached through the supersede
        for projection in each(client):
            whole = projection.anchored_digests(tx, stream_id)
            parted = projection.anchored_digests(tx, stream_id, part)
            assert parted, projection.name
            assert sorted(parted) == sorted(i for i in whole if i[0] in part.anchors)
            savepoint = tx.connection.begin_nested()
            assert projection.replay_part(tx, stream_id, part), projection.name
            again = projection.anchored_digests(tx, stream_id)
            savepoint.rollback()
            assert sorted(again) == sorted(whole), projection.name
