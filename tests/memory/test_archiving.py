"""Semvec mechanism 1, selective forgetting: past a per-subject capacity of the
retrieval tier, the lowest-retention nodes are archived out of default retrieval.

Archiving is a decision recorded as an event (replay applies it, never
re-decides), not an erasure: archived nodes stay readable, exported, and
erasable like any node.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from pydantic import ValidationError

from oblivio import MemoryClient, Node
from oblivio.cli import main
from oblivio.settings import Settings
from projections import events as ev
from projections.storage.tables import nodes
from tests.erasure._support import audit_entries
from tests.erasure.test_scheduler import maintenance_for
from tests.memory._support import events_of_type, remember
from workers import scheduler
from workers.archiving import Archiver, ArchiveReport

CONTENTS = [
    "I drink green tea in the morning.",
    "My dog is called Rex.",
    "My car is a red Fiat.",
    "I live in Lyon.",
]


def archiver(client: MemoryClient, capacity: int) -> Archiver:
    """The client's archiving job, with another capacity."""
    ctx = client.context
    return Archiver(ctx.store, ctx.graph, ctx.scoring, capacity, lambda: ctx.clock())


def four_memories(memory: MemoryClient) -> list[Node]:
    """Four memories, the first two retrieved often: they are the ones kept at capacity 2."""
    stored = [remember(memory, text)[1] for text in CONTENTS]
    for _ in range(5):
        memory.retrieve("green tea", user_id="alice", limit=1)
        memory.retrieve("dog Rex", user_id="alice", limit=1)
    memory.context.access.flush()  # the job reads the written counts, like a worker would
    later = memory.context.clock() + timedelta(days=30)
    memory.context.clock = lambda: later
    return stored


def ids(found: list[Node]) -> set[uuid.UUID]:
    return {n.id for n in found}


def test_the_lowest_retention_nodes_leave_default_retrieval_by_one_event(
    memory: MemoryClient,
) -> None:
    tea, dog, car, lyon = four_memories(memory)
    report = archiver(memory, 2).run()
    assert (report.subjects, report.nodes) == (1, 2)

    [decision] = events_of_type(memory, "alice", ev.ARCHIVED)
    assert decision.data is not None
    assert decision.data["reason"] == "capacity"
    [audit] = [
        e["entry"]
        for e in audit_entries(memory)
        if e["entry"]["action"] == "retrieval.archived"
        and e["entry"]["subject_ref"] == memory.subject_ref("alice")
    ]
    assert audit["object_refs"] == {"event_id": str(decision.event_id)}
    assert audit["counts"] == {"nodes": 2, "capacity": 2}
    assert set(decision.data["retention"]) == {str(car.id), str(lyon.id)}
    assert max(decision.data["retention"].values()) < 1

    everything = "tea dog car Lyon"
    assert ids(memory.retrieve(everything, user_id="alice", limit=10).nodes) == {tea.id, dog.id}
    with_archived = memory.retrieve(everything, user_id="alice", limit=10, include_archived=True)
    assert ids(with_archived.nodes) == {tea.id, dog.id, car.id, lyon.id}


def test_archived_nodes_stay_readable_listed_on_request_and_exported(
    memory: MemoryClient,
) -> None:
    tea, dog, car, lyon = four_memories(memory)
    archiver(memory, 2).run()

    node = memory.get_node(car.id, user_id="alice")
    assert node is not None
    assert node.content == car.content
    assert node.archived_at is not None
    assert node.lifecycle == car.lifecycle
    state = memory.get_assertion_state(car.id, user_id="alice")
    assert state is not None
    assert state.archived_at == node.archived_at
    assert state.current
    assert ids(memory.list_nodes(user_id="alice").nodes) == {tea.id, dog.id}
    listed = memory.list_nodes(user_id="alice", include_archived=True).nodes
    assert ids(listed) == {tea.id, dog.id, car.id, lyon.id}
    exported = {n["id"]: n for n in memory.export_subject(user_id="alice")["nodes"]}
    assert exported[str(car.id)]["content"] == car.content
    assert exported[str(car.id)]["archived_at"] is not None
    assert exported[str(tea.id)]["archived_at"] is None


def test_a_second_pass_archives_nothing_twice(memory: MemoryClient) -> None:
    four_memories(memory)
    job = archiver(memory, 2)
    assert job.run().nodes == 2
    assert job.run().nodes == 0
    assert len(events_of_type(memory, "alice", ev.ARCHIVED)) == 1


def test_off_archives_nothing(memory: MemoryClient) -> None:
    four_memories(memory)
    assert memory.context.archiver.capacity == 0  # the default
    assert not memory.context.archiver.run()
    assert archiver(memory, 4).run().nodes == 0  # within capacity
    assert events_of_type(memory, "alice", ev.ARCHIVED) == []
    assert len(memory.retrieve("tea dog car Lyon", user_id="alice", limit=10).nodes) == 4


def test_replay_equals_the_live_state_after_archiving(memory: MemoryClient) -> None:
    four_memories(memory)
    archiver(memory, 1).run()
    comparison = memory.replay_comparison(user_id="alice")
    assert comparison
    assert all(live == replayed for live, replayed in comparison.values())


def test_archived_nodes_are_erased_like_any_other(memory: MemoryClient) -> None:
    _, _, car, lyon = four_memories(memory)
    archiver(memory, 2).run()
    deleted = memory.delete_event(
        car.event_id, user_id="alice", legal_ground="art17-1-b", wait=True
    )
    assert deleted.certificate is not None  # the replay left the same state as the live one
    assert memory.get_node(car.id, user_id="alice") is None
    assert memory.get_node(lyon.id, user_id="alice") is not None  # still archived, not erased
    forgotten = memory.forget(user_id="alice", legal_ground="art17-1-b")
    assert forgotten.certificate is not None
    assert memory.get_node(lyon.id) is None
    query = sa.select(sa.func.count()).where(nodes.c.node_id.in_([car.id, lyon.id]))
    with memory.context.store.backend.engine.connect() as conn:
        assert conn.execute(query).scalar_one() == 0


def test_the_scheduler_runs_the_job(memory: MemoryClient) -> None:
    four_memories(memory)
    maintenance = replace(maintenance_for(memory, "proc-archiving"), archiver=archiver(memory, 3))
    assert scheduler.run_exclusively(maintenance, "archiving")
    assert len(memory.list_nodes(user_id="alice").nodes) == 3


def test_the_cli_runs_one_pass_for_one_user(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    with MemoryClient(data) as memory:
        four_memories(memory)
        remember(memory, "Bob likes jazz.", user_id="bob")
        remember(memory, "Bob plays chess.", user_id="bob")
    runner = CliRunner()
    command = ["--data-dir", data, "archive", "run", "--user", "alice", "--capacity", "1"]
    result = runner.invoke(main, command)
    assert result.exit_code == 0, result.output
    assert "archived 3 nodes of 1 subjects" in result.output
    with MemoryClient(data) as memory:
        assert len(memory.list_nodes(user_id="alice").nodes) == 1
        assert len(memory.list_nodes(user_id="bob").nodes) == 2
    off = runner.invoke(main, ["--data-dir", data, "archive", "run"])
    assert off.exit_code != 0
    assert "archiving is off" in off.output


@pytest.mark.parametrize("value", ["-1", "lots"])
def test_a_bad_capacity_setting_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="retrieval_capacity"):
        Settings.from_env({"OBLIVIO_RETRIEVAL_CAPACITY": value})


# -- coming back: the tier is the `capacity` current nodes of highest retention ----------


def tier_pass(memory: MemoryClient, capacity: int) -> ArchiveReport:
    """One pass over alice's stream only (on PostgreSQL the module's tests share a database)."""
    head = memory.context.store.head(memory.context.namespace, "alice")
    assert head is not None
    return archiver(memory, capacity).run([head.stream.stream_id])


def moved(memory: MemoryClient, event_type: str) -> list[set[str]]:
    """The node ids each decision of ``event_type`` moved, in order."""
    return [set((e.data or {})["after"]) for e in events_of_type(memory, "alice", event_type)]


def assert_replay_equal(memory: MemoryClient) -> None:
    comparison = memory.replay_comparison(user_id="alice")
    assert comparison
    assert all(live == replayed for live, replayed in comparison.values())


def test_a_reinforced_archived_node_comes_back_by_an_event(memory: MemoryClient) -> None:
    tea, dog, car, _ = four_memories(memory)
    tier_pass(memory, 2)
    memory.reinforce(car.id, user_id="alice")  # its age starts again: the best retained now

    report = tier_pass(memory, 2)
    assert (report.subjects, report.nodes, report.restored) == (1, 1, 1)
    assert moved(memory, ev.UNARCHIVED) == [{str(car.id)}]
    [_, second] = moved(memory, ev.ARCHIVED)
    assert second <= {str(tea.id), str(dog.id)}  # the weaker of the two makes room
    back = memory.get_node(car.id, user_id="alice")
    assert back is not None
    assert back.archived_at is None
    found = ids(memory.retrieve("tea dog car Lyon", user_id="alice", limit=10).nodes)
    assert car.id in found
    assert len(found) == 2
    [audit] = [
        e["entry"]
        for e in audit_entries(memory)
        if e["entry"]["action"] == "retrieval.unarchived"
        and e["entry"]["subject_ref"] == memory.subject_ref("alice")
    ]
    assert audit["counts"] == {"nodes": 1, "capacity": 2}
    assert_replay_equal(memory)
    assert not tier_pass(memory, 2)  # settled: a second pass moves nothing


def test_a_grown_capacity_brings_archived_nodes_back(memory: MemoryClient) -> None:
    tea, dog, car, lyon = four_memories(memory)
    tier_pass(memory, 2)

    report = tier_pass(memory, 3)
    assert (report.nodes, report.restored) == (0, 1)
    report = tier_pass(memory, 10)
    assert (report.nodes, report.restored) == (0, 1)
    assert set().union(*moved(memory, ev.UNARCHIVED)) == {str(car.id), str(lyon.id)}
    everything = memory.retrieve("tea dog car Lyon", user_id="alice", limit=10).nodes
    assert ids(everything) == {tea.id, dog.id, car.id, lyon.id}
    assert_replay_equal(memory)
    assert not tier_pass(memory, 10)


def test_an_archived_node_retrieved_often_on_request_comes_back(memory: MemoryClient) -> None:
    *_, lyon = four_memories(memory)
    tier_pass(memory, 2)
    for _ in range(20):
        [hit] = memory.retrieve(
            "I live in Lyon", user_id="alice", limit=1, include_archived=True
        ).nodes
        assert hit.id == lyon.id  # each counts one access of the archived node
    memory.context.access.flush()

    report = tier_pass(memory, 2)
    assert (report.nodes, report.restored) == (1, 1)
    assert moved(memory, ev.UNARCHIVED) == [{str(lyon.id)}]
    assert lyon.id in ids(memory.retrieve("Lyon", user_id="alice", limit=10).nodes)
    assert len(memory.list_nodes(user_id="alice").nodes) == 2
    assert_replay_equal(memory)


def test_the_successor_of_a_correction_keeps_the_retention_of_what_it_retired(
    memory: MemoryClient,
) -> None:
    """Superseding a kept memory by an archived one brings that one back: it carries the
    retired fact now.  Without that rule Lyon (retrieved more than the car) would take
    the place the retired tea left."""
    tea, dog, car, lyon = four_memories(memory)
    for _ in range(5):
        memory.retrieve("green tea", user_id="alice", limit=1)  # tea: the best retained
    memory.context.access.flush()
    tier_pass(memory, 2)  # car and Lyon leave
    for _ in range(3):
        memory.retrieve("I live in Lyon", user_id="alice", limit=1, include_archived=True)
    memory.context.access.flush()
    memory.supersede(tea.id, car.id, user_id="alice")

    report = tier_pass(memory, 2)
    assert (report.nodes, report.restored) == (0, 1)
    assert moved(memory, ev.UNARCHIVED) == [{str(car.id)}]
    assert ids(memory.list_nodes(user_id="alice").nodes) == {car.id, dog.id}
    assert lyon.id not in ids(memory.retrieve("Lyon", user_id="alice", limit=10).nodes)
    assert_replay_equal(memory)
