"""Snapshots built in the background (workers.snapshots): a person's first certified delete
replays only its part; a build comes from a replay and is kept only if the live rows equal
it; an erasure takes what it erased out of every snapshot before it returns."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa

from eventstore.schema import rebuild_jobs
from oblivio import MemoryClient
from oblivio.bootstrap import build_worker_service
from oblivio.settings import Settings
from projections.proofs import snapshot_digest
from projections.storage import snapshot_jobs
from projections.storage.snapshot_store import SnapshotStore
from projections.storage.tables import nodes, projection_snapshots
from tests._clients import Opener
from tests.erasure._support import (
    completed,
    engine,
    marker,
    raw_rows,
    run_jobs,
    stream_id_of,
    wait_until,
)
from tests.erasure.test_bounded_proofs import _certified, _fresh_snapshot_digests, _history
from workers.snapshots import SnapshotPolicy

ALICE = "alice@example.org"
EVERY = 5


def build_snapshots(client: MemoryClient, every: int = EVERY) -> int:
    """Enqueue the due builds with threshold ``every`` and run them; how many ran."""
    builder = client.context.snapshots
    builder.policy = SnapshotPolicy(every=every)
    builder.enqueue_due()
    return builder.run_pending()


def _builds(client: MemoryClient) -> list[sa.Row[Any]]:
    return raw_rows(
        client,
        sa.select(rebuild_jobs)
        .where(rebuild_jobs.c.kind == snapshot_jobs.KIND)
        .order_by(rebuild_jobs.c.created_at, rebuild_jobs.c.projection),
    )


def _snapshot_items(client: MemoryClient) -> dict[str, set[uuid.UUID]]:
    """The anchors every snapshot of ALICE's stream holds, by projection (decrypted)."""
    stream_id = stream_id_of(client, ALICE)
    with client.context.store.transaction() as tx:
        cipher = tx.cipher(stream_id)
        assert cipher is not None
        snapshots = SnapshotStore(tx.connection, cipher)
        found = {}
        for projection in client.context.projections:
            items = snapshots.items(projection.name, range(256))
            found[projection.name] = {a for bucket in items.values() for a, _ in bucket}
        return found


def test_the_first_delete_after_a_background_build_replays_only_its_part(
    client: MemoryClient,
) -> None:
    events = _history(client, 12)
    # The vector state has not applied the stream: its build waits, the graph's runs.
    assert build_snapshots(client) == 2
    statuses = {b.projection: b.status for b in _builds(client)}
    assert statuses == {client.context.graph.name: "done", "vector_state": "queued"}
    [waiting] = [b for b in _builds(client) if b.status == "queued"]
    assert waiting.attempts == 0
    assert "not applied" in (waiting.last_error or "")

    client.replay_comparison(user_id=ALICE)  # vectors caught up
    with engine(client).begin() as conn:  # past its wait, for the test
        conn.execute(rebuild_jobs.update().values(run_after=client.context.clock()))
    assert client.context.snapshots.run_pending() == 1
    assert {b.status for b in _builds(client)} == {"done"}
    assert client.context.snapshots.pending() == 0
    # Due again only once the history grew by EVERY events.
    assert client.context.snapshots.enqueue_due() == 0

    certified = _certified(client, events[3])  # the person's first certified delete
    for result in certified.values():
        assert result["proof"]["replayed"] == "part", result
        assert result["equal"] is True
    assert {n: p["proof"]["snapshot"]["digest"] for n, p in certified.items()} == (
        _fresh_snapshot_digests(client)
    )


def test_a_build_moves_an_existing_snapshot_by_replaying_what_was_written_since(
    client: MemoryClient,
) -> None:
    _history(client, 6)
    client.replay_comparison(user_id=ALICE)
    build_snapshots(client)
    for i in range(EVERY):
        client.store(f"Later {i} {marker('note')}", user_id=ALICE)
    client.replay_comparison(user_id=ALICE)

    assert build_snapshots(client) == 2

    stream_id = stream_id_of(client, ALICE)
    header_versions = raw_rows(
        client,
        sa.select(projection_snapshots.c.stream_version).where(
            projection_snapshots.c.stream_id == stream_id, projection_snapshots.c.bucket == -1
        ),
    )
    head = client.context.store.head(client.context.namespace, ALICE)
    assert head is not None
    assert {r.stream_version for r in header_versions} == {head.version}
    with client.context.store.transaction() as tx:
        cipher = tx.cipher(stream_id)
        assert cipher is not None
        snapshots = SnapshotStore(tx.connection, cipher)
        headers = {p.name: snapshots.header(p.name) for p in client.context.projections}
    assert all(h is not None and h.stream_version == head.version for h in headers.values())
    # What the builds left is what a fresh replay's snapshot is.
    kept = {name: snapshot_digest(h) for name, h in headers.items() if h is not None}
    assert kept == _fresh_snapshot_digests(client)


def test_a_drifted_row_keeps_the_build_from_keeping_a_snapshot(client: MemoryClient) -> None:
    events = _history(client, 6)
    client.replay_comparison(user_id=ALICE)
    stream_id = stream_id_of(client, ALICE)
    with engine(client).begin() as conn:  # a row no event explains
        conn.execute(
            nodes.update()
            .where(nodes.c.stream_id == stream_id, nodes.c.event_id == events[2])
            .values(reinforcement_count=nodes.c.reinforcement_count + 7)
        )

    build_snapshots(client)

    graph_build = next(b for b in _builds(client) if b.projection == client.context.graph.name)
    assert graph_build.status == "queued"
    assert "differ from a replay" in graph_build.last_error
    assert _snapshot_items(client)[client.context.graph.name] == set()
    # The delete replays the stream whole and certifies what it finds: unequal.
    graph = _certified(client, events[4])[client.context.graph.name]
    assert graph["proof"]["replayed"] == "stream"
    assert graph["equal"] is False


def test_a_build_waits_while_an_erasure_of_the_stream_is_being_proved(
    client: MemoryClient,
) -> None:
    events = _history(client, 6)
    client.replay_comparison(user_id=ALICE)
    client.delete_event(events[0], user_id=ALICE)  # its jobs not run yet

    assert build_snapshots(client) == 2

    assert {b.status for b in _builds(client)} == {"queued"}
    assert all("erasure" in (b.last_error or "") for b in _builds(client))
    assert run_jobs(client) == 2
    assert all(p["equal"] for p in _certified(client, events[1]).values())


def test_an_erasure_takes_its_items_out_of_every_snapshot_before_it_returns(
    client: MemoryClient,
) -> None:
    events = _history(client, 8)
    client.replay_comparison(user_id=ALICE)
    build_snapshots(client)
    erased_event = events[5]
    erased_nodes = {n.id for n in client.get_event_nodes(erased_event, user_id=ALICE)}
    before = _snapshot_items(client)
    assert erased_event in before[client.context.graph.name]
    assert erased_nodes <= before["vector_state"]

    request = client.delete_event(erased_event, user_id=ALICE)  # jobs not run

    after = _snapshot_items(client)
    assert erased_event not in after[client.context.graph.name]
    assert not erased_nodes & after["vector_state"]
    assert not erased_nodes & after[client.context.graph.name]
    # The proof that follows still starts from the snapshot and certifies equality.
    run_jobs(client)
    payload = client.verify_certificate(completed(client.erasure_status(request.request_id)))
    assert {p["proof"]["replayed"] for p in payload["projections"]} == {"part"}
    assert all(p["equal"] for p in payload["projections"])


def test_forget_deletes_background_snapshots_and_closes_the_stream_to_builds(
    client: MemoryClient,
) -> None:
    _history(client, 6)
    client.replay_comparison(user_id=ALICE)
    build_snapshots(client)
    stream_id = stream_id_of(client, ALICE)

    completed(client.forget(ALICE, wait=True))

    left = raw_rows(
        client,
        sa.select(projection_snapshots).where(projection_snapshots.c.stream_id == stream_id),
    )
    assert left == []
    assert client.context.snapshots.enqueue_due() == 0


def test_a_worker_process_builds_snapshots_on_its_own(
    open_client: Opener, store_settings: Settings
) -> None:
    """``oblivio worker``'s service: the scheduler enqueues the due builds and the snapshot
    builder runs them, with nobody calling either; the first delete is then a part proof."""
    settings = store_settings.model_copy(update={"snapshot_every": EVERY})
    client = open_client(snapshot_every=EVERY)
    events = _history(client, 8)
    service = build_worker_service(client.context, settings)
    service.run()
    try:
        wait_until(
            lambda: len([b for b in _builds(client) if b.status == "done"]) == 2,
            "the two snapshot builds to be done",
            timeout=60,
        )
    finally:
        service.stop()
        service.join(10.0)
    certified = _certified(client, events[2])
    assert {p["proof"]["replayed"] for p in certified.values()} == {"part"}
    assert all(p["equal"] for p in certified.values())
