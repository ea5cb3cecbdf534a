"""The vector projection run by two runners at once on PostgreSQL.

Two ``ProjectionRunner`` instances, each on its own ``EventStore`` (its own
connection pool) over the same database, loop in threads while a writer keeps
appending.  Partition claims (``FOR UPDATE SKIP LOCKED`` on the checkpoint
rows) must make every memory event apply exactly once, in stream order.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import EventStore, RecordedEvent, SubjectCipher
from eventstore.schema import events
from oblivio import MemoryClient
from oblivio.bootstrap import open_event_store
from oblivio.settings import Settings
from projections import events as ev
from projections.base import StreamView
from projections.embedders import HashingEmbedder
from projections.storage.tables import attractors, nodes, triggers, vectors
from projections.vectors import VectorProjection
from tests.memory._support import remember
from workers.projector import ProjectionRunner

pytestmark = pytest.mark.postgres

USERS = [f"user-{i}" for i in range(8)]
ROUNDS = 3
RUN_TIMEOUT = 60.0


class CountingProjection:
    """The vector projection, recording every event it is asked to apply."""

    def __init__(self, inner: VectorProjection, applied: list[uuid.UUID]) -> None:
        self.inner = inner
        self.name = inner.name
        self.version = inner.version
        self.applied = applied
        self.lock = threading.Lock()

    def apply(self, conn: Connection, cipher: SubjectCipher, event: RecordedEvent) -> None:
        self.inner.apply(conn, cipher, event)
        with self.lock:
            self.applied.append(event.event_id)

    def apply_page(
        self, conn: Connection, page: Sequence[tuple[SubjectCipher, RecordedEvent]]
    ) -> None:
        self.inner.apply_page(conn, page)
        with self.lock:
            self.applied += [event.event_id for _, event in page]

    def purge(self, conn: Connection, stream_id: int) -> None:
        self.inner.purge(conn, stream_id)

    def digest(self, view: StreamView, stream_id: int) -> str:
        return self.inner.digest(view, stream_id)


def _write(memory: MemoryClient, round_: int) -> None:
    for user in USERS:
        _, old = remember(memory, f"{user} lives in town {round_}", user)
        _, new = remember(memory, f"{user} moved to city {round_}", user)
        memory.supersede(old.id, new.id, user_id=user)
        # (Removing a trigger first waits for the vector state through the client's
        # own runner, which would take work from the two runners under test.)
        memory.add_resonance_trigger(user_id=user, keyword=f"city {round_}")
        memory.add_negative_attractor(f"town {round_}", user_id=user)
        if round_ == 1:
            memory.clear_negative_attractors(user_id=user)


def _count(memory: MemoryClient, table: sa.Table) -> int:
    with memory.context.store.backend.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def _memory_event_ids(memory: MemoryClient) -> list[uuid.UUID]:
    query = sa.select(events.c.event_id).where(events.c.type.in_(sorted(ev.MEMORY_EVENT_TYPES)))
    with memory.context.store.backend.engine.connect() as conn:
        return list(conn.execute(query).scalars())


def _loop(runner: ProjectionRunner, stop: threading.Event, errors: list[BaseException]) -> None:
    try:
        while not stop.is_set():
            if not runner.run_pending():
                time.sleep(0.005)
    except BaseException as e:  # reported by the test
        errors.append(e)


def _until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_two_runners_apply_every_event_exactly_once(pg_settings: Settings) -> None:
    memory = MemoryClient(settings=pg_settings)
    stores: list[EventStore] = [open_event_store(pg_settings) for _ in range(2)]
    applied: list[uuid.UUID] = []
    runners = [
        ProjectionRunner(store, CountingProjection(VectorProjection(HashingEmbedder()), applied))
        for store in stores
    ]
    stop = threading.Event()
    errors: list[BaseException] = []
    threads = [threading.Thread(target=_loop, args=(r, stop, errors)) for r in runners]
    try:
        _write(memory, 0)
        assert _count(memory, vectors) == 0  # nothing has run the projection yet
        for thread in threads:
            thread.start()
        for round_ in range(1, ROUNDS):  # keep writing while both runners work
            _write(memory, round_)
        expected = _memory_event_ids(memory)
        done = _until(lambda: len(applied) >= len(expected) or bool(errors), RUN_TIMEOUT)
        time.sleep(0.2)  # a double application would show up by now
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=RUN_TIMEOUT)
        for store in stores:
            store.close()

    assert errors == []
    assert done, f"applied {len(applied)} of {len(expected)} events"
    assert {k: n for k, n in Counter(applied).items() if n != 1} == {}
    assert set(applied) == set(expected)
    assert _count(memory, vectors) == _count(memory, nodes) == len(USERS) * ROUNDS * 2
    assert _count(memory, triggers) == len(USERS) * ROUNDS  # one added per user and round
    assert _count(memory, attractors) == len(USERS)  # the last round's; the rest were cleared
    for user in USERS[:3]:
        digests = memory.replay_comparison(user_id=user)
        assert all(live == replayed for live, replayed in digests.values())
    memory.close()
