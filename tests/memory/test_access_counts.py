"""Semvec mechanism 1, access frequency: retrieval counts what it returns, and a
memory's retention grows with those counts.

The counts are operational statistics: no event per read, outside the replayed
state digests, gone with the nodes they count when those are erased.
"""

from __future__ import annotations

import math
import time
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa

from eventstore.schema import streams
from oblivio import MemoryClient
from projections.scoring import ScoringConfig, ScoringConfigError
from projections.storage.tables import node_access
from tests.memory._support import log_ids, remember
from tests.memory.conftest import Opener


def counts(client: MemoryClient) -> dict[uuid.UUID, int]:
    """Every count row of the test's namespace, as written (whatever process wrote it)."""
    query = (
        sa.select(node_access.c.node_id, node_access.c.accesses)
        .join(streams, streams.c.stream_id == node_access.c.stream_id)
        .where(streams.c.namespace == client.context.namespace)
    )
    with client.context.store.backend.engine.connect() as conn:
        return {row.node_id: row.accesses for row in conn.execute(query)}


def retrieve_ids(client: MemoryClient, query: str, limit: int = 1) -> list[uuid.UUID]:
    return [n.id for n in client.retrieve(query, user_id="alice", limit=limit).nodes]


def test_each_returned_node_counts_one_access_and_no_event_is_written(
    memory: MemoryClient,
) -> None:
    _, dog = remember(memory, "My dog is called Rex.")
    _, car = remember(memory, "My car is a red Fiat.")
    retrieve_ids(memory, "dog", limit=2)  # waits for the vectors; counts both
    before = log_ids(memory)
    for _ in range(3):
        assert retrieve_ids(memory, "my dog Rex") == [dog.id]
    memory.context.access.flush()

    assert log_ids(memory) == before  # reads append nothing to the log
    assert counts(memory) == {dog.id: 4, car.id: 1}
    [result] = memory.retrieve("my dog Rex", user_id="alice", limit=1).results
    assert result.components.accesses == 4  # the count the score used


def test_counts_are_written_in_batches_not_per_retrieval(memory: MemoryClient) -> None:
    remember(memory, "My dog is called Rex.")
    memory.context.access.flush_seconds = 3600.0
    for _ in range(5):
        retrieve_ids(memory, "dog")
    assert counts(memory) == {}  # still pending in this process
    assert memory.context.access.flush() == 1
    assert list(counts(memory).values()) == [5]
    assert memory.context.access.flush() == 0  # nothing pending: no write


def test_the_writer_thread_writes_them_without_the_retrieval_waiting(
    memory: MemoryClient,
) -> None:
    _, dog = remember(memory, "My dog is called Rex.")
    memory.context.access.flush_seconds = 0.05
    retrieve_ids(memory, "dog")
    deadline = time.monotonic() + 10
    while not counts(memory) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert counts(memory) == {dog.id: 1}


def test_another_process_reads_the_written_counts_when_it_loads(reopen: Opener) -> None:
    writer, reader = reopen(), reopen()
    _, dog = remember(writer, "My dog is called Rex.")
    for _ in range(3):
        retrieve_ids(writer, "dog")
    writer.close()  # closing flushes what is pending
    [result] = reader.retrieve("dog", user_id="alice", limit=1).results
    assert result.node.id == dog.id
    assert result.components.accesses == 3


def test_retrievals_leave_the_state_digests_unchanged(memory: MemoryClient) -> None:
    remember(memory, "My dog is called Rex.")
    remember(memory, "My car is a red Fiat.")
    before = memory.replay_comparison(user_id="alice")
    for _ in range(4):
        retrieve_ids(memory, "dog", limit=2)
    memory.context.access.flush()
    assert counts(memory)
    after = memory.replay_comparison(user_id="alice")
    assert after == before
    assert all(live == replayed for live, replayed in after.values())


def test_delete_event_purges_the_erased_nodes_counts(memory: MemoryClient) -> None:
    dog_event, dog = remember(memory, "My dog is called Rex.")
    _, car = remember(memory, "My car is a red Fiat.")
    retrieve_ids(memory, "dog", limit=2)
    memory.context.access.flush()
    assert set(counts(memory)) == {dog.id, car.id}

    memory.delete_event(dog_event, user_id="alice", legal_ground="art17-1-b")
    assert counts(memory) == {car.id: 1}


def test_a_count_pending_when_its_node_is_erased_is_never_written(memory: MemoryClient) -> None:
    dog_event, dog = remember(memory, "My dog is called Rex.")
    memory.context.access.flush_seconds = 3600.0
    assert retrieve_ids(memory, "dog") == [dog.id]  # pending, not written
    memory.delete_event(dog_event, user_id="alice", legal_ground="art17-1-b")
    memory.context.access.flush()
    assert counts(memory) == {}


def test_forget_purges_every_count_of_the_subject(memory: MemoryClient) -> None:
    remember(memory, "My dog is called Rex.")
    _, bob_node = remember(memory, "Bob's cat is grey.", user_id="bob")
    retrieve_ids(memory, "dog")
    memory.retrieve("cat", user_id="bob", limit=1)
    memory.context.access.flush_seconds = 3600.0
    retrieve_ids(memory, "dog")  # pending when the subject is forgotten
    memory.forget(user_id="alice", legal_ground="art17-1-b")
    memory.context.access.flush()
    assert counts(memory) == {bob_node.id: 1}


# -- retention grows with the counts -------------------------------------------------------


def test_of_two_equal_old_memories_the_often_retrieved_one_ranks_first(
    memory: MemoryClient,
) -> None:
    _, tea = remember(memory, "I drink green tea in the morning.")
    _, coffee = remember(memory, "I drink black coffee in the morning.")
    for _ in range(20):
        assert retrieve_ids(memory, "green tea") == [tea.id]
    later = memory.context.clock() + timedelta(days=90)
    memory.context.clock = lambda: later

    results = memory.retrieve("what do I drink in the morning", user_id="alice", limit=2).results
    by_id = {r.node.id: r for r in results}
    assert by_id[tea.id].components.recency > by_id[coffee.id].components.recency
    assert [r.node.id for r in results] == [tea.id, coffee.id]


def test_a_frequently_used_older_memory_outlives_an_untouched_newer_one(
    memory: MemoryClient,
) -> None:
    start = memory.context.clock()
    memory.context.store.clock = lambda: start
    _, old = remember(memory, "My locker code is 4711.")
    for _ in range(30):
        assert retrieve_ids(memory, "locker code") == [old.id]
    memory.context.store.clock = lambda: start + timedelta(days=10)
    _, new = remember(memory, "My gym opens at six.")
    memory.context.clock = lambda: start + timedelta(days=60)

    results = memory.retrieve("locker gym", user_id="alice", limit=2).results
    recency = {r.node.id: r.components.recency for r in results}
    # Half-life 30 days × stretch 1.5 (salience 0.5) × (1 + 0.5 · ln 31) for the old one.
    assert recency[old.id] == pytest.approx(2 ** (-60 / (45 * (1 + 0.5 * math.log(31)))))
    assert recency[new.id] == pytest.approx(2 ** (-50 / 45))
    assert recency[old.id] > recency[new.id]


def test_access_weight_zero_turns_the_term_off(reopen: Opener) -> None:
    memory = reopen(scoring=ScoringConfig(access_weight=0.0))
    _, tea = remember(memory, "I drink green tea in the morning.")
    for _ in range(5):
        retrieve_ids(memory, "green tea")
    memory.context.clock = lambda: tea.created_at + timedelta(days=45)
    [result] = memory.retrieve("green tea", user_id="alice", limit=1).results
    assert result.components.accesses == 5  # counted, but it weighs nothing
    assert result.components.recency == pytest.approx(2 ** (-45 / 45), rel=1e-6)


@pytest.mark.parametrize("value", [-0.1, 10.5, math.nan, math.inf, True, "1"])
def test_access_weight_out_of_range_is_a_typed_error(value: object) -> None:
    with pytest.raises(ScoringConfigError, match="access_weight"):
        ScoringConfig(access_weight=value)  # type: ignore[arg-type]
    assert issubclass(ScoringConfigError, ValueError)
