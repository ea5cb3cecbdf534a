"""A consistent read catches up its own stream; the runner skips what it applied.

Both ways in, a partition's page and a read's catch-up of one stream, go through
the stream's mark (``projection_stream_marks``): each event is applied once,
whoever reaches it first, and the read touches nothing but its own stream
(on Citus: its one shard, tests/citus/test_one_phase.py).
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
import sqlalchemy as sa
from alembic import command

from eventstore import START
from eventstore.migrate import _config
from oblivio import MemoryClient
from oblivio.bootstrap import migration_locations, table_metadatas
from oblivio.settings import Settings
from projections.storage import checkpoints
from projections.storage.tables import attractors, nodes, stream_marks, triggers, vectors
from tests.memory._support import stream
from tests.memory.test_projection_runners import (
    CountingProjection,
    _count,
    _memory_event_ids,
)
from tests.workers._support import running

USERS = ["alice", "bob", "carol"]


def _vectors_of(memory: MemoryClient, user: str) -> int:
    ctx = memory.context
    head = ctx.store.head(ctx.namespace, user)
    assert head is not None
    query = sa.select(sa.func.count()).where(vectors.c.stream_id == head.stream.stream_id)
    with ctx.store.backend.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def _counting(memory: MemoryClient) -> list[uuid.UUID]:
    """Every event the client's runner applies from now on, by either way in."""
    applied: list[uuid.UUID] = []
    runner = memory.context.runner
    runner.projection = CountingProjection(runner.projection, applied)  # type: ignore[arg-type,assignment]
    return applied


def test_a_consistent_read_catches_up_its_own_stream_only(fresh_memory: MemoryClient) -> None:
    for user in USERS:
        fresh_memory.store(f"{user} keeps basil on the windowsill", user_id=user)
    assert [n.content for n in fresh_memory.retrieve("basil", user_id="alice").nodes] == [
        "alice keeps basil on the windowsill"
    ]
    assert _vectors_of(fresh_memory, "alice") == 1
    # Nobody else's stream was applied, and no partition of the log was read: the
    # runner's checkpoints are where they started.
    assert _vectors_of(fresh_memory, "bob") == _vectors_of(fresh_memory, "carol") == 0
    ctx = fresh_memory.context
    with ctx.store.reading() as view:
        lag = checkpoints.lag(view.connection, ctx.runner.checkpoint_name)
    assert {cursor for _, cursor in lag} == {START}


def test_the_runner_skips_what_a_reads_catch_up_applied(fresh_memory: MemoryClient) -> None:
    applied = _counting(fresh_memory)
    for user in USERS:
        fresh_memory.store(f"{user} moved to Lisbon", user_id=user)
        fresh_memory.add_resonance_trigger(user_id=user, keyword="Lisbon")
        fresh_memory.add_negative_attractor("Porto", user_id=user)
    fresh_memory.retrieve("Lisbon", user_id="alice")  # alice's three events, by her read
    fresh_memory.store("alice works in Belém", user_id="alice")
    # The runner meets alice's first three events in its pages and skips them (a
    # trigger or attractor added twice would fail on its key), then applies the rest.
    fresh_memory.context.runner.run_pending()
    fresh_memory.retrieve("Belém", user_id="alice")  # nothing left to catch up
    assert {k: n for k, n in Counter(applied).items() if n != 1} == {}
    assert set(applied) == set(_memory_event_ids(fresh_memory))
    assert _count(fresh_memory, vectors) == _count(fresh_memory, nodes) == len(USERS) + 1
    assert _count(fresh_memory, triggers) == _count(fresh_memory, attractors) == len(USERS)
    for user in USERS:
        digests = fresh_memory.replay_comparison(user_id=user)
        assert all(live == replayed for live, replayed in digests.values())


@pytest.mark.postgres
def test_reads_racing_the_runner_apply_every_event_exactly_once(pg_settings: Settings) -> None:
    memory = MemoryClient(settings=pg_settings)
    applied = _counting(memory)
    with running(memory.context.runner) as errors:
        for round_ in range(4):
            for user in USERS:
                memory.store(f"{user} fact {round_}", user_id=user)
                memory.add_resonance_trigger(user_id=user, keyword=f"fact {round_}")
                found = memory.retrieve(f"fact {round_}", user_id=user)
                assert f"{user} fact {round_}" in [n.content for n in found.nodes]
    memory.context.runner.run_pending()
    assert errors == []
    assert {k: n for k, n in Counter(applied).items() if n != 1} == {}
    assert set(applied) == set(_memory_event_ids(memory))
    assert _count(memory, triggers) == len(USERS) * 4
    for user in USERS:
        digests = memory.replay_comparison(user_id=user)
        assert all(live == replayed for live, replayed in digests.values())
    memory.close()


def _marks(memory: MemoryClient) -> set[tuple[object, ...]]:
    with memory.context.store.backend.engine.connect() as conn:
        return {tuple(row) for row in conn.execute(sa.select(stream_marks))}


def test_the_migration_marks_what_the_runners_checkpoints_cover(
    fresh_memory: MemoryClient,
) -> None:
    # pj0016: each stream's mark starts at its last event the partition's checkpoint
    # passed, so an upgraded store applies nothing twice and misses nothing.
    for user in USERS:
        fresh_memory.store(f"{user} keeps basil on the windowsill", user_id=user)
        fresh_memory.add_resonance_trigger(user_id=user, keyword="basil")
    fresh_memory.context.runner.run_pending()
    covered = _marks(fresh_memory)
    assert len(covered) == len(USERS)
    fresh_memory.store("alice moved to Lisbon", user_id="alice")  # not applied yet
    engine = fresh_memory.context.store.backend.engine
    with engine.begin() as conn:
        config = _config(conn, migration_locations(), table_metadatas())
        command.downgrade(config, "pj0015")  # the store before the marks
        assert not sa.inspect(conn).has_table(stream_marks.name)
        command.upgrade(config, "heads")
    assert _marks(fresh_memory) == covered
    applied = _counting(fresh_memory)
    found = fresh_memory.retrieve("Lisbon", user_id="alice")
    assert found.nodes[0].content == "alice moved to Lisbon"
    assert applied == [stream(fresh_memory, "alice")[-1].event_id]
