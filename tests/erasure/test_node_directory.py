"""The node directory: nodes found by id alone, and what erasure leaves in it.

Forget does not purge memory_node_directory (that is what keeps its cost
from growing with the store).  These tests
pin what that may and may not mean: the entries left are exactly what the
tombstones already say (event id, ordinal, and the node id derived from
them), no read or command finds an erased node through them, and stores
created before the directory get their entries from the migration.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from alembic import command

from eventstore.migrate import _config
from oblivio import MemoryClient
from oblivio.bootstrap import migration_locations, table_metadatas
from oblivio.errors import NodeUnavailableError
from projections import events as ev
from projections.storage.tables import node_directory
from tests.erasure._support import (
    engine,
    raw_rows,
    run_jobs,
    seed_subject,
    stream_id_of,
    whole_log,
)

ALICE, BOB = "alice@example.org", "bob@example.org"


def directory(client: MemoryClient) -> set[tuple[uuid.UUID, uuid.UUID, int]]:
    rows = raw_rows(client, sa.select(node_directory))
    return {(r.node_id, r.event_id, r.ordinal) for r in rows}


def test_the_directory_holds_ids_only() -> None:
    assert [c.name for c in node_directory.c] == ["stream_id", "node_id", "event_id", "ordinal"]


def test_forget_leaves_only_what_the_tombstones_say(client: MemoryClient) -> None:
    alice, bob = seed_subject(client, ALICE), seed_subject(client, BOB)
    before = directory(client)

    client.forget(ALICE, wait=True)

    # The entries stay; Alice's are her tombstones' event ids and the node
    # ids derived from them, nothing else.
    assert directory(client) == before
    tombstoned = {e.event_id for e in whole_log(client) if e.erased}
    assert set(alice.event_ids) <= tombstoned
    alices = {entry for entry in before if entry[1] in tombstoned}
    assert alices == {(ev.node_id(e, 0), e, 0) for e in alice.event_ids}
    # No path finds an erased node through them.
    old, new = alice.node_ids
    for node_id in alice.node_ids:
        assert client.get_node(node_id, include_superseded=True) is None
        assert client.get_assertion_state(node_id) is None
    with pytest.raises(NodeUnavailableError):
        client.reinforce(new)
    with pytest.raises(NodeUnavailableError):
        client.supersede(old, new)
    # Bob's nodes are still found by id alone.
    assert all(client.get_node(n, include_superseded=True) for n in bob.node_ids)


def test_an_erased_id_looks_like_an_unknown_one_after_a_new_generation(
    client: MemoryClient,
) -> None:
    alice = seed_subject(client, ALICE)
    client.forget(ALICE, wait=True)
    event = client.store("a new beginning", user_id=ALICE)
    [fresh] = client.get_event_nodes(event, user_id=ALICE)

    for caller in (None, ALICE):
        assert client.get_node(fresh.id, user_id=caller) is not None
        for node_id in [*alice.node_ids, uuid.uuid4()]:
            assert client.get_node(node_id, user_id=caller, include_superseded=True) is None
            with pytest.raises(NodeUnavailableError):
                client.supersede(node_id, fresh.id, user_id=caller)


def test_delete_event_and_its_rebuild_keep_the_directory_consistent(
    client: MemoryClient,
) -> None:
    alice = seed_subject(client, ALICE)
    before = directory(client)

    client.delete_event(alice.event_ids[0], user_id=ALICE, wait=False)
    assert run_jobs(client) == 2  # the node graph is replayed over existing entries

    assert directory(client) == before
    assert client.get_node(alice.node_ids[0], include_superseded=True) is None
    assert client.get_node(alice.node_ids[1], include_superseded=True) is not None


def test_the_migration_gives_existing_nodes_their_entries(client: MemoryClient) -> None:
    alice = seed_subject(client, ALICE)
    expected = directory(client)
    with engine(client).begin() as conn:
        config = _config(conn, migration_locations(), table_metadatas())
        command.downgrade(config, "pj0001")  # the schema before the directory
        assert not sa.inspect(conn).has_table(node_directory.name)
        command.upgrade(config, "heads")

    assert directory(client) == expected
    assert all(client.get_node(n, include_superseded=True) for n in alice.node_ids)


def test_the_migration_keys_existing_entries_by_their_nodes_stream(client: MemoryClient) -> None:
    # pj0015: the entries of a store keyed by node id alone get their node's stream.
    alice, bob = seed_subject(client, ALICE), seed_subject(client, BOB)
    streams = {n: stream_id_of(client, s.user_id) for s in (alice, bob) for n in s.node_ids}
    with engine(client).begin() as conn:
        config = _config(conn, migration_locations(), table_metadatas())
        command.downgrade(config, "pj0014")  # the directory keyed by node id alone
        columns = [c["name"] for c in sa.inspect(conn).get_columns(node_directory.name)]
        assert "stream_id" not in columns
        command.upgrade(config, "heads")

    rows = raw_rows(client, sa.select(node_directory))
    keyed = {r.node_id: r.stream_id for r in rows}
    assert {n: keyed[n] for n in streams} == streams
    assert all(client.get_node(n, include_superseded=True) for n in streams)
