"""Appends that touch one shard commit with one-phase commit.

An append locks its stream row by id, moves the head and inserts the events, all
on the stream's shard (``streams``, ``data_keys`` and ``events`` are co-located by
``stream_id``; the subject's stream is found first in the coordinator's stream
directory, which an append only reads).  Citus records every two-phase commit in
``pg_dist_transaction`` (one row per worker part, until 2PC recovery clears the
committed ones); with recovery paused, an append that went two-phase leaves one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from eventstore import EventStore, KeyringFile, NewEvent, Subject, create_backend
from eventstore.backends import citus as citus_layout
from eventstore.errors import OperationalError
from eventstore.migrate import upgrade
from oblivio import MemoryClient
from oblivio.bootstrap import upgrade_schema
from oblivio.settings import Settings
from oblivio_bench.citus import CitusCluster
from projections import MIGRATIONS, metadata
from tests.citus.test_failed_commit_prepared import recovery_paused
from tests.citus.test_layout import placement
from tests.memory.test_restriction import _sealed_at_head as sealed_at_head
from tests.memory.test_restriction import _written as written

pytestmark = pytest.mark.citus


def two_phase_records(url: str) -> int:
    with psycopg.connect(url) as conn:
        (count,) = conn.execute("SELECT count(*) FROM pg_dist_transaction").fetchone()  # type: ignore[misc]
    return int(count)


def client_settings(citus_url: str, tmp_path: Path) -> Settings:
    """A client's settings on the cluster's database, its keyring in ``tmp_path``."""
    return Settings(
        data_dir=tmp_path, database_url=citus_url, keyring_path=tmp_path / "keyring.json"
    )


@pytest.fixture
def citus_store(citus_url: str, tmp_path: Path) -> Iterator[EventStore]:
    store = EventStore(create_backend(citus_url), KeyringFile(tmp_path / "keyring.json"))
    yield store
    store.close()


def test_an_append_to_an_existing_stream_writes_no_two_phase_commit(
    citus_url: str, citus_store: EventStore
) -> None:
    subjects = [f"person-{i}" for i in range(8)]
    with recovery_paused(citus_url):
        for subject in subjects:  # creating a generation writes the directory too: 2PC
            citus_store.append("default", subject, [NewEvent("note", {"n": 0})])
        before = two_phase_records(citus_url)
        for subject in subjects:
            citus_store.append("default", subject, [NewEvent("note", {"n": 1})])
            citus_store.append(
                "default", subject, [NewEvent("note", {"n": n}) for n in range(2, 5)]
            )
        assert two_phase_records(citus_url) == before
    for subject in subjects:
        assert [e.data["n"] for e in citus_store.read_stream("default", subject)] == [0, 1, 2, 3, 4]
    assert citus_store.verify().ok


def test_a_batch_longer_than_one_insert_is_one_append_on_one_shard(
    citus_url: str, citus_store: EventStore
) -> None:
    # 1,001 events: the head's move with the first 1,000 in one statement, one INSERT more.
    citus_store.append("default", "person-1", [NewEvent("note", {"n": -1})])
    with recovery_paused(citus_url):
        before = two_phase_records(citus_url)
        written = citus_store.append(
            "default", "person-1", [NewEvent("note", {"n": n}) for n in range(1001)]
        )
        assert two_phase_records(citus_url) == before
    assert [e.version for e in written] == list(range(2, 1003))
    assert [e.position for e in written] == sorted(e.position for e in written)
    stored = citus_store.read_stream("default", "person-1")
    assert [e.data["n"] for e in stored] == list(range(-1, 1001))
    assert citus_store.verify().ok


def test_a_store_to_an_existing_subject_writes_no_two_phase_commit(
    citus_url: str, tmp_path: Path
) -> None:
    # store(): the append and the node graph's rows (source event, nodes, their
    # directory entries), all keyed by stream and on the stream's shard.
    settings = client_settings(citus_url, tmp_path)
    with MemoryClient(settings=settings) as client, recovery_paused(citus_url):
        for user in ("alice", "bob", "carol"):
            client.store(f"{user} keeps basil on the windowsill", user_id=user)
        before = two_phase_records(citus_url)
        for user in ("alice", "bob", "carol"):
            event_id = client.store(f"{user} moved to Lisbon", user_id=user)
            client.store_many([{"content": f"{user} fact {n}"} for n in range(3)], user_id=user)
        assert two_phase_records(citus_url) == before
        [node] = client.get_event_nodes(event_id, user_id="carol")
        assert client.get_node(node.id) is not None  # found by id alone, on its shard


def test_a_consistent_retrieve_right_after_a_store_writes_no_two_phase_commit(
    citus_url: str, tmp_path: Path
) -> None:
    # The read's catch-up writes the new memory's vector and the stream's mark, both on
    # the stream's shard.  Before, it did a page of the vector state's log partition and
    # moved the partition's checkpoint on the coordinator: two-phase commit each time.
    settings = client_settings(citus_url, tmp_path)
    with MemoryClient(settings=settings) as client:
        for user in ("alice", "bob"):
            client.store(f"{user} keeps basil on the windowsill", user_id=user)
            client.retrieve("basil", user_id=user)
        with recovery_paused(citus_url):
            before = two_phase_records(citus_url)
            for user in ("alice", "bob"):
                client.store(f"{user} moved to Lisbon", user_id=user)
                found = client.retrieve("Lisbon", user_id=user)
                assert found.nodes[0].content == f"{user} moved to Lisbon"
            assert two_phase_records(citus_url) == before


def test_an_append_refused_by_its_heads_condition_writes_nothing_even_if_committed(
    citus_url: str, tmp_path: Path
) -> None:
    # The INSERT does not come FROM the moved head: rows sent beside a head that stayed
    # (here: a restricted subject's; then a stale head) must not survive a commit.
    settings = client_settings(citus_url, tmp_path)
    with MemoryClient(settings=settings) as client:
        client.store("I drink green tea.", user_id="alice")
        stale = sealed_at_head(client, "alice", past_restriction=False)
        client.restrict("alice", ground="art18-1-a", reference="T-5")
        head = client.context.store.head(client.context.namespace, "alice")
        assert not written(client, sealed_at_head(client, "alice", past_restriction=False))
        assert not written(client, stale)
        assert client.context.store.head(client.context.namespace, "alice") == head
        assert written(client, sealed_at_head(client, "alice", past_restriction=True))
        assert client.context.store.verify(client.context.namespace).ok


def append_at_a_stale_head(store: EventStore) -> None:
    with store.transaction() as tx:
        stream = tx.lock_stream(Subject("default", "person-1"), create=True)
        stream.version = 7  # as if the head had moved under the writer
        tx.append_locked(stream, [NewEvent("note", {"n": 1})])


def test_a_head_that_did_not_move_writes_nothing(citus_store: EventStore) -> None:
    # The INSERT goes out with the head's UPDATE, not FROM it: when the head is not
    # where the writer saw it, the append reports it and the transaction rolls back.
    citus_store.append("default", "person-1", [NewEvent("note", {"n": 0})])
    with pytest.raises(OperationalError, match="stream head moved"):
        append_at_a_stale_head(citus_store)
    assert [e.data for e in citus_store.read_stream("default", "person-1")] == [{"n": 0}]


@pytest.fixture
def bare_citus_url(citus: CitusCluster) -> Iterator[str]:
    name = f"oblivio_d_{uuid.uuid4().hex[:12]}"
    yield citus.create_database(name)
    citus.drop_database(name)


def test_upgrade_moves_the_stream_rows_of_an_older_layout_onto_the_shards(
    bare_citus_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store distributed before the stream directory: its streams and data keys on
    # the coordinator, its schema at es0013 (no directory).
    backend = create_backend(bare_citus_url)
    upgrade(backend.engine, [MIGRATIONS], [metadata])
    keyring = KeyringFile(tmp_path / "keyring.json")
    store = EventStore(backend, keyring)
    written = [
        store.append("default", f"person-{i % 6}", [NewEvent("note", {"n": i})])[0]
        for i in range(12)
    ]
    with backend.engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE stream_directory"))
        conn.execute(
            sa.text(
                "UPDATE alembic_version SET version_num = 'es0013' WHERE version_num = 'es0014'"
            )
        )
        monkeypatch.setattr(citus_layout, "_CENTRAL", frozenset({"streams", "data_keys"}))
        monkeypatch.setattr(citus_layout, "_WITH_THEIR_STREAM", frozenset())
        citus_layout.distribute(conn)
    monkeypatch.undo()
    assert placement(bare_citus_url)["streams"] == "n"
    assert placement(bare_citus_url)["data_keys"] == "n"

    upgrade_schema(backend.engine)  # what `oblivio db upgrade` runs

    kinds = placement(bare_citus_url)
    assert (kinds["streams"], kinds["data_keys"], kinds["stream_directory"]) == ("h", "h", "n")
    page = store.read_all(limit=100)
    assert [e.data for e in page.events] == [e.data for e in written]
    assert store.verify().ok
    with recovery_paused(bare_citus_url):
        before = two_phase_records(bare_citus_url)
        store.append("default", "person-3", [NewEvent("note", {"n": 99})])
        assert two_phase_records(bare_citus_url) == before
    assert [e.data["n"] for e in store.read_stream("default", "person-3")] == [3, 9, 99]
    # New generations continue after the copied ids.
    store.append("default", "person-new", [NewEvent("note", {"n": 100})])
    store.close()


def test_upgrade_marks_the_streams_of_a_populated_cluster(citus_url: str, tmp_path: Path) -> None:
    # pj0016 and pj0017 on a cluster that already holds people: their marks are
    # computed from the distributed events and the coordinator's checkpoints (a fresh
    # database runs them before anything is distributed, with no rows to read).
    settings = client_settings(citus_url, tmp_path)
    users = ("alice", "bob", "carol")
    with MemoryClient(settings=settings) as client:
        for user in users:
            client.store(f"{user} keeps basil on the windowsill", user_id=user)
            client.store(f"{user} moved to Lisbon", user_id=user)
            client.retrieve("basil", user_id=user)  # marks the stream as far as it read
        # The checkpoints cover every event.
        while client.context.runner.run_pending() or client.context.updates.run_pending():
            pass
    engine = sa.create_engine(citus_url.replace("postgresql://", "postgresql+psycopg://"))
    marks = "SELECT stream_id, name, version FROM projection_stream_marks ORDER BY 1, 2"
    with engine.begin() as conn:
        before = conn.execute(sa.text(marks)).all()
        conn.execute(sa.text("DROP TABLE projection_stream_marks"))
        conn.execute(
            sa.text(
                "UPDATE alembic_version SET version_num = 'pj0015' WHERE version_num = 'pj0017'"
            )
        )
    upgrade_schema(engine)  # what `oblivio db upgrade` runs
    assert placement(citus_url)["projection_stream_marks"] == "h"
    with engine.begin() as conn:
        after = conn.execute(sa.text(marks)).all()
    engine.dispose()
    # Every follower with checkpoints gets marks; the vector state's and the detector's
    # are as they were.
    assert [row for row in after if row.name in {r.name for r in before}] == before
    assert len(before) == 2 * len(users)
    with MemoryClient(settings=settings) as client:
        for user in users:
            client.store(f"{user} left Lisbon for Porto", user_id=user)
            assert client.retrieve("Porto", user_id=user).nodes[0].content.endswith("Porto")
