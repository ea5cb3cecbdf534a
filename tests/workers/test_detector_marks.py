"""The likely-update detector's marks: a memory is judged once, by a consistent read's
catch-up of its stream or by the detector's page of a log partition, whoever gets
there first; its decision is appended once; a forget leaves no mark behind.

Both ways in go through the detector's per-stream marks (``projection_stream_marks``
under its name): the page skips what a read judged and the read skips what the page
judged.  Real followers, both backends (a race on PostgreSQL).
"""

from __future__ import annotations

import uuid
from collections import Counter

import pytest
import sqlalchemy as sa
from alembic import command

from eventstore import RecordedEvent
from eventstore.migrate import _config
from oblivio import MemoryClient
from oblivio.bootstrap import migration_locations, table_metadatas
from oblivio.settings import Settings
from projections import events as ev
from projections.storage import stream_marks
from projections.storage.tables import stream_marks as stream_marks_table
from tests.memory._support import events_of_type, stream
from tests.workers._support import running
from workers.updates import LikelyUpdateWorker

OLD = "I paddle a green kayak on the lake."
NEW = "I sold the kayak and swim now."
FILLER = ("I keep basil on the kitchen windowsill.", "My favourite colour is green.")


def _judging(detector: LikelyUpdateWorker) -> list[uuid.UUID]:
    """Every memory the detector judges from now on (its neighbours looked up), by
    either way in."""
    judged: list[uuid.UUID] = []
    judge = detector._judge

    def counted(event: RecordedEvent, *args: object) -> object:
        judged.append(event.event_id)
        return judge(event, *args)  # type: ignore[arg-type]

    detector._judge = counted  # type: ignore[assignment,method-assign]
    return judged


def _mark(memory: MemoryClient, user: str) -> int | None:
    """The detector's mark of the user's stream (``None``: no row)."""
    ctx = memory.context
    head = ctx.store.head(ctx.namespace, user)
    assert head is not None
    return _mark_of(memory, head.stream.stream_id)


def _mark_of(memory: MemoryClient, stream_id: int) -> int | None:
    ctx = memory.context
    with ctx.store.reading() as view:
        return stream_marks.versions(view.connection, ctx.updates.name, [stream_id]).get(stream_id)


def _with_history(memory: MemoryClient, user: str = "alice") -> None:
    for text in (*FILLER, OLD):
        memory.store(text, user_id=user)
    memory.retrieve("anything", user_id=user)  # judged and caught up


def test_the_page_skips_a_memory_a_reads_catch_up_judged(fresh_memory: MemoryClient) -> None:
    _with_history(fresh_memory)
    judged = _judging(fresh_memory.context.updates)
    new = fresh_memory.store(NEW, user_id="alice")
    fresh_memory.retrieve("kayak", user_id="alice")  # judges it, appends the decision
    assert judged == [new]
    assert _mark(fresh_memory, "alice") == stream(fresh_memory, "alice")[-1].version
    fresh_memory.context.updates.run_pending()  # meets the memory and the decision
    assert judged == [new]
    [decision] = events_of_type(fresh_memory, "alice", ev.LIKELY_UPDATE)
    assert decision.data is not None
    assert decision.data["source_event_id"] == str(new)


def test_a_reads_catch_up_skips_what_the_page_judged(fresh_memory: MemoryClient) -> None:
    _with_history(fresh_memory)
    judged = _judging(fresh_memory.context.updates)
    first = fresh_memory.store(NEW, user_id="alice")
    fresh_memory.context.updates.run_pending()  # the page judges it and decides
    assert judged == [first]
    after_page = _mark(fresh_memory, "alice")
    assert after_page == stream(fresh_memory, "alice")[-1].version  # past its decision
    second = fresh_memory.store("I quit swimming and run now.", user_id="alice")
    fresh_memory.retrieve("sport", user_id="alice")
    assert judged == [first, second]  # the read judged its own stream's new memory alone
    assert len(events_of_type(fresh_memory, "alice", ev.LIKELY_UPDATE)) <= 2


def test_a_decision_among_others_writes_leaves_the_rest_to_judge(
    fresh_memory: MemoryClient,
) -> None:
    # The mark passes the decision only when nothing came between what was read and it:
    # here a memory stored while the page judged stays to be judged by the next one in.
    _with_history(fresh_memory)
    detector = fresh_memory.context.updates
    judged = _judging(detector)
    new = fresh_memory.store(NEW, user_id="alice")
    judge_page = detector._judge_page

    def store_meanwhile(events: list[RecordedEvent]) -> object:
        found = judge_page(events)
        if events and events[0].event_id == new:  # once
            fresh_memory.store("My favourite colour is blue now.", user_id="alice")
        return found

    detector._judge_page = store_meanwhile  # type: ignore[assignment,method-assign]
    ctx = fresh_memory.context
    head = ctx.store.head(ctx.namespace, "alice")
    assert head is not None
    assert detector.follow_page(detector.partition_of(head.stream.stream_id)) is not None
    detector._judge_page = judge_page  # type: ignore[method-assign]
    versions = {e.event_id: e.version for e in stream(fresh_memory, "alice")}
    assert _mark(fresh_memory, "alice") == versions[new]
    fresh_memory.retrieve("colour", user_id="alice")
    assert len(judged) == 2
    assert judged[0] == new
    assert _mark(fresh_memory, "alice") == stream(fresh_memory, "alice")[-1].version


def test_a_forgotten_stream_keeps_no_mark_of_the_detector(fresh_memory: MemoryClient) -> None:
    _with_history(fresh_memory)
    ctx = fresh_memory.context
    head = ctx.store.head(ctx.namespace, "alice")
    assert head is not None
    stream_id = head.stream.stream_id
    fresh_memory.store(NEW, user_id="alice")
    with ctx.store.reading() as view:  # what a page or a catch-up read before the forget
        read = view.stream_since(stream_id, 0, head.version + 1)
    assert _mark_of(fresh_memory, stream_id) == head.version
    fresh_memory.forget("alice", legal_ground="art17-1-a", wait=True)
    assert _mark_of(fresh_memory, stream_id) is None
    # Recording what was read before: the mark locked is made again, and dropped.
    with ctx.store.transaction() as tx:
        ctx.updates._record_marked(tx, read.events, read.ciphers, [])
    ctx.updates.run_pending()  # the forgotten stream's events, read erased
    assert _mark_of(fresh_memory, stream_id) is None
    assert events_of_type(fresh_memory, "alice", ev.LIKELY_UPDATE) == []


def test_a_restricted_persons_stream_is_passed_undecided(fresh_memory: MemoryClient) -> None:
    _with_history(fresh_memory)
    ctx = fresh_memory.context
    fresh_memory.store(NEW, user_id="alice")
    fresh_memory.restrict("alice", ground="art18-1-a", reference="T-31")
    head = ctx.store.head(ctx.namespace, "alice")
    assert head is not None
    judged = _mark(fresh_memory, "alice")
    assert judged is not None
    caught_up = ctx.updates.catch_up_stream(
        head.stream.stream_id, head.version, 10.0, judged=judged
    )
    assert caught_up is not None
    assert events_of_type(fresh_memory, "alice", ev.LIKELY_UPDATE) == []
    assert _mark(fresh_memory, "alice") == head.version


@pytest.mark.postgres
def test_reads_racing_the_detector_record_each_decision_once(pg_settings: Settings) -> None:
    memory = MemoryClient(settings=pg_settings)
    users = ["alice", "bob", "carol"]
    for user in users:
        _with_history(memory, user)
    judged = _judging(memory.context.updates)
    stored: list[uuid.UUID] = []
    with running(memory.context.updates) as errors:
        for round_ in range(3):
            for user in users:
                stored.append(
                    memory.store(f"I sold kayak number {round_} and swim now.", user_id=user)
                )
                memory.retrieve("kayak", user_id=user)
    memory.context.updates.run_pending()
    assert errors == []
    assert set(judged) == set(stored)
    sources = Counter(
        (e.data or {})["source_event_id"]
        for user in users
        for e in events_of_type(memory, user, ev.LIKELY_UPDATE)
    )
    assert {k: n for k, n in sources.items() if n != 1} == {}
    for user in users:
        assert _mark(memory, user) == stream(memory, user)[-1].version
    memory.close()


def _detector_marks(memory: MemoryClient) -> set[tuple[object, ...]]:
    query = sa.select(stream_marks_table).where(
        stream_marks_table.c.name == memory.context.updates.name
    )
    with memory.context.store.backend.engine.connect() as conn:
        return {tuple(row) for row in conn.execute(query)}


def test_the_migration_marks_what_the_detectors_checkpoints_cover(
    fresh_memory: MemoryClient,
) -> None:
    # pj0017: marks left behind where pj0016 put them (nothing moved the detector's
    # since) are marked again where the detector's checkpoints stand.
    for user in ("alice", "bob"):
        _with_history(fresh_memory, user)
    fresh_memory.context.updates.run_pending()
    covered = _detector_marks(fresh_memory)
    assert len(covered) == 2
    fresh_memory.store(NEW, user_id="alice")  # not judged yet
    engine = fresh_memory.context.store.backend.engine
    with engine.begin() as conn:
        config = _config(conn, migration_locations(), table_metadatas())
        command.downgrade(config, "pj0016")
        conn.execute(stream_marks_table.update().values(version=1, commit_group=0, position=0))
        command.upgrade(config, "heads")
    assert _detector_marks(fresh_memory) == covered
    judged = _judging(fresh_memory.context.updates)
    fresh_memory.retrieve("kayak", user_id="alice")
    assert judged == [stream(fresh_memory, "alice")[-2].event_id]  # the new memory alone
