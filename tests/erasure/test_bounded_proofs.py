"""Certified deletes whose proof costs what they change (projections.proofs): the first
delete of a stream replays it whole and keeps a snapshot; later ones replay only the part
they and the writes since reached, and the snapshot they leave equals a fresh replay's."""

from __future__ import annotations

import sqlite3
import uuid
from contextlib import closing
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections.proofs import replayed_snapshot_digest
from projections.storage.tables import erased_parts, nodes, projection_snapshots
from projections.vectors import VectorProjection
from tests._at_rest import ServerFiles, files_below, scan_files, superuser, wal_kept
from tests.erasure._support import completed, engine, marker, raw_rows, run_jobs, stream_id_of

ALICE = "alice@example.org"


def _certified(client: MemoryClient, event_id: uuid.UUID) -> dict[str, dict[str, Any]]:
    """Delete one event, run the jobs; the verified certificate's projections by name."""
    status = client.delete_event(event_id, user_id=ALICE)
    run_jobs(client)
    payload = client.verify_certificate(completed(client.erasure_status(status.request_id)))
    assert payload["format"] == "oblivio-forget-certificate/3"
    return {p["name"]: p for p in payload["projections"]}


def _fresh_snapshot_digests(client: MemoryClient) -> dict[str, str]:
    stream_id = stream_id_of(client, ALICE)
    with client.context.store.transaction() as tx:
        tx.lock_stream(stream_id)
        return {
            p.name: replayed_snapshot_digest(tx, p, stream_id) for p in client.context.projections
        }


def _history(client: MemoryClient, count: int) -> list[uuid.UUID]:
    """Stored memories, a correction, a contradiction, a reinforcement and an item."""
    events = [client.store(f"Note {i} {marker('note')}", user_id=ALICE) for i in range(count)]
    first, second, third = (client.get_event_nodes(e, user_id=ALICE)[0] for e in events[:3])
    client.supersede(first.id, second.id, user_id=ALICE)
    client.contradict(second.id, third.id, user_id=ALICE)
    client.reinforce(third.id, user_id=ALICE)
    client.put_item("favourite-colour", f"teal {marker('item')}", user_id=ALICE)
    client.put_item("favourite-colour", f"amber {marker('item')}", user_id=ALICE)
    return events


def test_later_deletes_replay_only_their_part_and_leave_a_replays_snapshot(
    client: MemoryClient,
) -> None:
    events = _history(client, 12)
    client.replay_comparison(user_id=ALICE)  # vectors caught up

    first = _certified(client, events[-1])
    assert {p["proof"]["replayed"] for p in first.values()} == {"stream"}
    assert all(p["equal"] for p in first.values())

    # Writes after the snapshot, then deletes of a corrected memory and of a plain one.
    later = client.store(f"Later {marker('note')}", user_id=ALICE)
    [later_node] = client.get_event_nodes(later, user_id=ALICE)
    client.reinforce(later_node.id, user_id=ALICE)
    client.replay_comparison(user_id=ALICE)
    for deleted in (events[1], events[5]):
        certified = _certified(client, deleted)
        for result in certified.values():
            proof = result["proof"]
            assert proof["replayed"] == "part", result
            assert result["equal"] is True, result
            assert proof["part"]["events"] < len(events), proof  # of 21 in the stream
        fresh = _fresh_snapshot_digests(client)
        assert {n: p["proof"]["snapshot"]["digest"] for n, p in certified.items()} == fresh
        # Each proof starts where the previous one left the snapshot.
    comparison = client.replay_comparison(user_id=ALICE)
    assert all(live == replayed for live, replayed in comparison.values())


def test_a_drifted_row_inside_the_part_is_certified_unequal(client: MemoryClient) -> None:
    events = _history(client, 6)
    client.replay_comparison(user_id=ALICE)
    _certified(client, events[-1])  # takes the snapshot
    # Written after the snapshot, so in the next proof's part (the erasure below does
    # not reach it, so it does not re-derive it either).
    target = client.store(f"Written later {marker('note')}", user_id=ALICE)
    client.replay_comparison(user_id=ALICE)
    stream_id = stream_id_of(client, ALICE)
    with engine(client).begin() as conn:  # a row no event explains
        conn.execute(
            nodes.update()
            .where(nodes.c.stream_id == stream_id, nodes.c.event_id == target)
            .values(reinforcement_count=nodes.c.reinforcement_count + 7)
        )

    graph = _certified(client, events[4])[client.context.graph.name]

    assert graph["proof"]["replayed"] == "part"
    assert graph["equal"] is False
    # The proof replayed the part in place: the drift is repaired.
    comparison = client.replay_comparison(user_id=ALICE)
    assert comparison[graph["name"]][0] == comparison[graph["name"]][1]


def test_a_trigger_event_in_the_part_sends_the_vector_proof_back_to_a_whole_replay(
    client: MemoryClient,
) -> None:
    events = _history(client, 4)
    client.replay_comparison(user_id=ALICE)
    _certified(client, events[-1])
    trigger = client.add_resonance_trigger(user_id=ALICE, keyword=marker("trigger"), weight=2.0)
    client.replay_comparison(user_id=ALICE)

    certified = _certified(client, events[0])

    assert certified[VectorProjection.name]["proof"]["replayed"] == "stream"
    assert certified[client.context.graph.name]["proof"]["replayed"] == "part"
    assert all(p["equal"] for p in certified.values())
    assert trigger is not None


def test_forget_deletes_the_snapshots_and_parts(client: MemoryClient) -> None:
    events = _history(client, 4)
    client.replay_comparison(user_id=ALICE)
    _certified(client, events[0])
    stream_id = stream_id_of(client, ALICE)

    def rows(table: sa.Table) -> int:
        return len(raw_rows(client, sa.select(table).where(table.c.stream_id == stream_id)))

    assert rows(projection_snapshots) > 0
    assert rows(erased_parts) == 1
    completed(client.forget(ALICE, wait=True))
    assert rows(projection_snapshots) == 0
    assert rows(erased_parts) == 0


# -- at rest: snapshots and parts are sealed --------------------------------------------


def _snapshotted_subject(client: MemoryClient) -> list[bytes]:
    """Memories with a snapshot and a part proof behind them; the needles to look for."""
    texts = [f"Snapshot canary {marker('zebra')}" for _ in range(6)]
    events = [client.store(text, user_id=ALICE) for text in texts]
    client.put_item("canary-item", f"Item canary {marker('item')}", user_id=ALICE)
    client.replay_comparison(user_id=ALICE)
    # Built in the background's way first (workers.snapshots), then moved by two proofs.
    builder = client.context.snapshots
    builder.policy = replace(builder.policy, every=3)
    builder.enqueue_due()
    assert builder.run_pending() == len(client.context.projections)
    assert {p["proof"]["replayed"] for p in _certified(client, events[0]).values()} == {"part"}
    proofs = _certified(client, events[1])
    assert {p["proof"]["replayed"] for p in proofs.values()} == {"part"}
    stream_id = stream_id_of(client, ALICE)
    assert raw_rows(
        client, sa.select(projection_snapshots).where(projection_snapshots.c.stream_id == stream_id)
    )
    tokens = [t.rsplit("-", 1)[1] for t in texts]
    return [t.encode() for t in [*texts, *tokens, ALICE]]


def test_sqlite_snapshots_and_parts_hold_no_plaintext(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    settings = Settings(data_dir=data_dir, keyring_path=tmp_path / "k.json")
    client = MemoryClient(settings=settings)
    try:
        needles = _snapshotted_subject(client)
        database = Path(str(client.context.store.backend.engine.url.database))
    finally:
        client.close()
    files = files_below(data_dir, skip=("keyring", "issuer-keys"))
    assert scan_files(files, needles) == {}
    # Positive control: the same scan finds a planted plaintext.
    with closing(sqlite3.connect(database)) as conn:
        conn.execute("CREATE TABLE plaintext_control (t TEXT)")
        conn.execute("INSERT INTO plaintext_control VALUES (?)", (needles[0].decode(),))
        conn.commit()
    assert needles[0] in scan_files([database], needles).get(database.name, [])


@pytest.mark.postgres
def test_postgres_snapshots_and_parts_hold_no_plaintext(
    pg_store_settings: Settings, postgres_url: str
) -> None:
    with superuser(postgres_url) as admin, wal_kept(admin) as start_lsn:
        files = ServerFiles(admin)
        client = MemoryClient(settings=pg_store_settings)
        try:
            needles = _snapshotted_subject(client)
        finally:
            client.close()
        assert files.relation_hits(needles) == {}
        assert files.wal_hits(start_lsn, needles) == {}
        admin.exec_driver_sql("CREATE TABLE plaintext_control (t text)")
        admin.execute(sa.text("INSERT INTO plaintext_control VALUES (:t)"), {"t": ALICE})
        assert ALICE.encode() in files.relation_hits(needles).get("plaintext_control", [])
