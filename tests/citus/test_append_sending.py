"""How an append is sent to the cluster: its statements' plans, and its waits.

On the cluster an append is several statements in one transaction
(``CitusBackend.append``): at the head the process remembers, the transaction's
BEGIN, the head's UPDATE, the events' and the graph rows' INSERTs go out in one
pipeline, and the COMMIT after it (the rows of a head that did not move must be
taken back first).  The single server's is one autocommitted statement
(tests/memory/test_store_statements.py).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from eventstore.backends.citus import _insert_events
from oblivio import MemoryClient
from tests.citus.test_one_phase import client_settings
from tests.memory._support import round_trips

pytestmark = pytest.mark.citus


def stored_contents(client: MemoryClient, user: str) -> list[str]:
    """What the subject's stream holds, in version order."""
    log, namespace = client.context.store, client.context.namespace
    return [str(e.data["content"]) for e in log.read_stream(namespace, user) if e.data]


def test_a_batchs_multi_row_insert_is_one_task_on_the_streams_shard(citus_url: str) -> None:
    # Its rows all name the stream: Citus routes it to that shard as one task, on the
    # connection that holds the stream's lock (one-phase commit).  The same rows
    # inserted FROM unnest (the single server's form) are pulled to the coordinator and
    # copied into the shard over another connection: two-phase commit.
    rows = 3
    values: dict[str, object] = {"stream_id": 7, "recorded_at": datetime(2026, 1, 1)}
    for i in range(rows):
        values |= {
            f"event_id{i}": uuid.uuid4(), f"version{i}": i + 1, f"type{i}": "note",
            f"schema_version{i}": 1, f"payload{i}": b"p", f"digest{i}": b"d",
            f"chain_hash{i}": b"c",
        }  # fmt: skip
    with psycopg.connect(citus_url) as conn:
        plan = [row[0] for row in conn.execute(f"EXPLAIN {_insert_events(rows)}", values)]
    assert [line.strip() for line in plan if "Task Count" in line] == ["Task Count: 1"]


def test_a_store_at_the_remembered_head_waits_twice_on_the_cluster(
    citus_url: str, tmp_path: Path
) -> None:
    # Before, the BEGIN went out on its own ahead of the pipeline: three waits.
    with MemoryClient(settings=client_settings(citus_url, tmp_path)) as client:
        client.store("Alice lives in Berlin", user_id="alice")  # the stream exists
        stored = round_trips(lambda: client.store("Alice moved", user_id="alice"))
        batch = [{"content": f"Alice fact {n}"} for n in range(50)]
        many = round_trips(lambda: client.store_many(batch, user_id="alice"))
        assert len(stored_contents(client, "alice")) == 52
    assert (stored, many) == (2, 2)


def test_a_refused_store_at_the_remembered_head_leaves_no_transaction_open(
    citus_url: str, tmp_path: Path
) -> None:
    # Another process moved the head: the append at the remembered head collides
    # with the versions written since, its transaction is rolled back, and the store
    # goes the lock's way on a clean connection.
    settings = client_settings(citus_url, tmp_path)
    with MemoryClient(settings=settings) as client, MemoryClient(settings=settings) as other:
        client.store("Alice lives in Berlin", user_id="alice")
        other.store("Alice is back", user_id="alice")
        client.store("Alice left", user_id="alice")
        contents = stored_contents(client, "alice")
    assert contents == ["Alice lives in Berlin", "Alice is back", "Alice left"]
