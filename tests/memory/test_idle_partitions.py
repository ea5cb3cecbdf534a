"""A partition nobody writes to keeps up with the log, and never skips a late event.

The vector projection reads the log partition by partition.  A page that finds
none of its partition's events moves that partition's checkpoint to the head
of the log it looked through, so a later catch-up of an idle partition starts
there instead of at the partition's last event, behind everything the other
partitions wrote since.
"""

from __future__ import annotations

import time

import pytest

from eventstore import LogCursor, Subject
from oblivio import MemoryClient
from oblivio.settings import Settings
from oblivio_bench.loading import stored_event
from tests.memory._support import remember

WAIT_SECONDS = 30.0


def partition_of(memory: MemoryClient, user: str) -> int:
    head = memory.context.store.head(memory.context.namespace, user)
    assert head is not None
    return memory.context.runner.partition_of(head.stream.stream_id)


def users_in_two_partitions(memory: MemoryClient) -> tuple[str, str]:
    """Two users whose streams fall in different partitions (each with one memory)."""
    remember(memory, "Alice keeps bees.", user_id="alice")
    for n in range(memory.context.runner.partitions):
        other = f"user-{n}"
        remember(memory, f"{other} plays chess.", user_id=other)
        if partition_of(memory, other) != partition_of(memory, "alice"):
            return "alice", other
    raise AssertionError("every stream fell in one partition")


def checkpoint_reaches(memory: MemoryClient, partition: int, cursor: LogCursor) -> LogCursor:
    """Run the projection until the partition's checkpoint reaches ``cursor`` (a shared
    PostgreSQL server may hold delivery back for a moment); the checkpoint then."""
    runner = memory.context.runner
    deadline = time.monotonic() + WAIT_SECONDS
    while (reached := runner.checkpoint(partition)) < cursor and time.monotonic() < deadline:
        runner.run_pending()
        time.sleep(0.01)
    return reached


def test_an_idle_partition_moves_to_the_head_of_the_log(fresh_memory: MemoryClient) -> None:
    alice, other = users_in_two_partitions(fresh_memory)
    idle = partition_of(fresh_memory, alice)
    store = fresh_memory.context.store
    for n in range(20):
        remember(fresh_memory, f"{other} won game {n}.", user_id=other)
    head = store.last_cursor(fresh_memory.context.namespace, other)
    assert head is not None
    alice_last = store.last_cursor(fresh_memory.context.namespace, alice)
    assert alice_last is not None
    assert alice_last < head

    # Alice's partition has nothing after her memory, yet its checkpoint follows the log.
    assert checkpoint_reaches(fresh_memory, idle, head) == head
    assert store.log_head() == head
    # A new memory of hers is then one short page away, and found.
    remember(fresh_memory, "Alice sells honey.", user_id=alice)
    found = fresh_memory.retrieve("honey", user_id=alice, limit=1).nodes
    assert [n.content for n in found] == ["Alice sells honey."]


@pytest.mark.postgres
def test_an_idle_partition_never_moves_past_an_event_that_commits_late(
    pg_settings: Settings,
) -> None:
    """An append of Alice's partition stays open while other partitions commit and the
    projection runs: the idle move stops below it, so the late event is applied."""
    with MemoryClient(settings=pg_settings) as memory:
        ctx = memory.context
        alice, other = users_in_two_partitions(memory)
        idle = partition_of(memory, alice)
        with ctx.store.transaction() as tx:
            stream = tx.lock_stream(Subject(ctx.namespace, alice), create=True)
            [late] = tx.append_locked(stream, [stored_event(alice, "Alice sells honey.")])
            ctx.graph.apply(tx.connection, tx.locked_cipher(stream), late)
            for n in range(5):
                remember(memory, f"{other} won game {n}.", user_id=other)
            ctx.runner.run_pending()
            assert ctx.runner.checkpoint(idle) < late.cursor
        head = ctx.store.last_cursor(ctx.namespace, other)
        assert head is not None
        assert checkpoint_reaches(memory, idle, head) >= head
        found = memory.retrieve("honey", user_id=alice, limit=1).nodes
        assert [n.content for n in found] == ["Alice sells honey."]
