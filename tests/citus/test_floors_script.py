"""benchmarks/citus_floors.py: its floor sends oblivio's own statements, on one shard.

The script's figures rest on two things checked here on the test cluster: the
floor's operations write what oblivio's append writes (the events and the node
graph's rows, on the stream it is aimed at) with one-phase commit, as oblivio's do;
and the batch's shape that its ``--batch-shapes`` compares, the arrays inserted
FROM unnest, commits with two-phase commit where the backend's commits with one.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import psycopg
import pytest

from oblivio import MemoryClient
from oblivio_bench.loading import stored_event
from tests.citus.test_failed_commit_prepared import recovery_paused
from tests.citus.test_one_phase import client_settings, two_phase_records

pytestmark = pytest.mark.citus

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "citus_floors.py"


def floors_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("citus_floors", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def rows_of(url: str, table: str, stream_id: int) -> int:
    with psycopg.connect(url) as conn:
        query = f"SELECT count(*) FROM {table} WHERE stream_id = %s"
        row = conn.execute(query.encode(), (stream_id,)).fetchone()
    assert row is not None
    return int(row[0])


def test_the_floor_writes_what_oblivio_writes_and_only_the_unnest_shape_goes_two_phase(
    citus_url: str, tmp_path: Path
) -> None:
    floors = floors_script()
    with MemoryClient(settings=client_settings(citus_url, tmp_path)) as client:
        log, namespace = client.context.store, client.context.namespace
        client.store("Alice lives in Berlin", user_id="alice")
        client.store("Bob lives in Rome", user_id="bob")  # the floor's stream
        with floors.taking(log) as store:
            client.store("Alice moved", user_id="alice")
        with floors.taking(log) as batch:
            log.append(namespace, "alice", [stored_event("alice", f"n{n}") for n in range(5)])
        bob = log.read_stream(namespace, "bob")[0].stream
    floor = floors.Floor(citus_url, "cluster", [bob])
    try:
        with recovery_paused(citus_url):
            before = two_phase_records(citus_url)
            [at_head] = floor.plan(store, 1, locked=False)
            [locked] = floor.plan(batch, 1, locked=True)
            for op in (at_head, locked):
                floor.run(op)
            one_phase = two_phase_records(citus_url) - before
            [unnest] = floor.plan(batch, 1, locked=True)
            unnest.statements = floors.batch_shape("unnest", unnest.statements)
            floor.run(unnest)
            two_phase = two_phase_records(citus_url) - before - one_phase
    finally:
        floor.close()
    assert (one_phase, two_phase) == (0, 1)
    # Bob's first store, the floor's store (its event and node rows) and two batches.
    assert floor.versions[bob.stream_id] == rows_of(citus_url, "events", bob.stream_id) == 12
    assert rows_of(citus_url, "memory_nodes", bob.stream_id) == 2
