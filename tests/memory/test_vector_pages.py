"""The vector projection applies a page of events at once, as one transaction.

A page mixes stored memories with trigger and attractor events of several
subjects; applying it in one go must leave exactly what a replay of each
subject's events, one by one, leaves.  A page that fails midway leaves
nothing, its checkpoint included, and the next run applies it whole.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator, Sequence

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import START, RecordedEvent, SubjectCipher
from oblivio import MemoryClient
from oblivio.settings import Settings
from projections.base import StreamView
from projections.storage.tables import attractors, triggers, vectors
from projections.storage.vector_store import NodeVector, VectorStore, unpack_vector
from projections.vectors import VectorProjection
from workers.projector import ProjectionRunner

USERS = ("alice", "bob")
VISIBILITY_TIMEOUT = 30.0


@pytest.fixture
def memory(fresh_settings: Settings) -> Iterator[MemoryClient]:
    """A client of a database of its own whose vector runner has one partition."""
    client = MemoryClient(settings=fresh_settings.model_copy(update={"partitions": 1}))
    yield client
    client.close()


class PageFailedError(RuntimeError):
    pass


class FailingAfterWriting:
    """The client's vector projection, failing once after writing a whole page."""

    def __init__(self, inner: VectorProjection) -> None:
        self.inner = inner
        self.name, self.version = inner.name, inner.version
        self.failed = False

    def apply(self, conn: Connection, cipher: SubjectCipher, event: RecordedEvent) -> None:
        self.inner.apply(conn, cipher, event)

    def apply_page(
        self, conn: Connection, page: Sequence[tuple[SubjectCipher, RecordedEvent]]
    ) -> None:
        self.inner.apply_page(conn, page)
        if not self.failed:
            self.failed = True
            raise PageFailedError()

    def purge(self, conn: Connection, stream_id: int) -> None:
        self.inner.purge(conn, stream_id)

    def digest(self, view: StreamView, stream_id: int) -> str:
        return self.inner.digest(view, stream_id)


def _write(memory: MemoryClient) -> int:
    """Events of both users, none applied yet, visible to runners; how many there are."""
    for user in USERS:
        memory.store(f"{user} lives in Berlin", user_id=user)
        memory.add_resonance_trigger(user_id=user, text="a flat in Berlin", weight=2.0)
        memory.add_resonance_trigger(user_id=user, keyword="Berlin")
        memory.store(f"{user} moved to Paris", user_id=user)
        memory.add_negative_attractor("Berlin", user_id=user)
        memory.clear_negative_attractors(user_id=user)
        memory.add_negative_attractor("an old address", user_id=user, severity=0.5)
        memory.store(f"{user} works in Lyon", user_id=user, meta={"confidence": 0.8})
    written = 8 * len(USERS)
    # On PostgreSQL the log delivers events only below the oldest transaction
    # open in the database.
    deadline = time.monotonic() + VISIBILITY_TIMEOUT
    while memory.context.store.count_after(START) < written and time.monotonic() < deadline:
        time.sleep(0.02)
    return written


def _count(memory: MemoryClient, table: sa.Table) -> int:
    with memory.context.store.backend.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def _assert_replay_equals_live(memory: MemoryClient) -> None:
    for user in USERS:
        digests = memory.replay_comparison(user_id=user)
        assert digests
        assert all(live == replayed for live, replayed in digests.values())


def test_one_page_of_mixed_events_leaves_the_state_of_a_replay(memory: MemoryClient) -> None:
    written = _write(memory)
    assert memory.context.runner.run_once(0) == written  # one page holds them all
    assert _count(memory, vectors) == 3 * len(USERS)
    assert _count(memory, triggers) == 2 * len(USERS)
    assert _count(memory, attractors) == len(USERS)
    _assert_replay_equals_live(memory)


def test_a_page_that_fails_midway_leaves_nothing_and_is_applied_again(
    memory: MemoryClient,
) -> None:
    written = _write(memory)
    failing = FailingAfterWriting(memory.context.runner.projection)
    runner = ProjectionRunner(memory.context.store, failing, partitions=1)
    with pytest.raises(PageFailedError):
        runner.run_once(0)
    assert _count(memory, vectors) == 0
    assert _count(memory, triggers) == 0
    assert memory.context.runner.checkpoint(0) == START
    assert runner.run_pending() == written
    assert runner.run_pending() == 0
    _assert_replay_equals_live(memory)


def test_vectors_written_again_replace_the_earlier_ones(memory: MemoryClient) -> None:
    """What a rebuild already applied, a runner's page may apply again (and vice versa)."""
    cipher = SubjectCipher(os.urandom(32), stream_id=1)
    node_ids = [uuid.uuid4() for _ in range(1_200)]

    def page(vector: list[float]) -> list[NodeVector]:
        return [NodeVector(cipher, n, uuid.uuid4(), "test", vector) for n in node_ids]

    with memory.context.store.backend.engine.begin() as conn:
        VectorStore(conn).put_vectors(page([1.0, 0.0]))
        VectorStore(conn).put_vectors(page([0.0, 1.0]))
        rows = VectorStore(conn).stream_vectors(1)
    assert len(rows) == len(node_ids)
    vectors_stored = {
        tuple(unpack_vector(cipher.open("vector", r.node_id.bytes, r.embedding))) for r in rows
    }
    assert vectors_stored == {(0.0, 1.0)}


def _vector_rows_read(conn: Connection) -> int:
    """Rows of the vector table this transaction has read so far (PostgreSQL's own
    count of the transaction's table scans and index fetches)."""
    read = conn.execute(
        sa.text(
            "SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_xact_user_tables "
            "WHERE relname = 'memory_vectors'"
        )
    ).scalar_one()
    return int(read)


# PostgreSQL only: it counts the rows a transaction reads, and SQLite's planner makes
# no guess about rows per subject that could send it through them all.
@pytest.mark.parametrize("fresh_settings", ["postgres"], indirect=True)
def test_a_page_of_vectors_reads_no_other_rows_of_its_subject(memory: MemoryClient) -> None:
    """Writing a page reads the rows of its own nodes at most, also on a table that
    has never been analysed (a store just loaded, or grown by one large subject): a
    planner counting on few rows per subject once read all of them for every page."""
    cipher = SubjectCipher(os.urandom(32), stream_id=1)

    def page(count: int) -> list[NodeVector]:
        return [
            NodeVector(cipher, uuid.uuid4(), uuid.uuid4(), "test", [1.0, 0.0]) for _ in range(count)
        ]

    engine = memory.context.store.backend.engine
    with engine.begin() as conn:
        VectorStore(conn).put_vectors(page(6_000))
    again = page(100)
    for _ in range(2):  # new nodes, then the same nodes replaced
        with engine.begin() as conn:
            VectorStore(conn).put_vectors(again)
            assert _vector_rows_read(conn) <= len(again)


# PostgreSQL only, as above: the count is the server's.
@pytest.mark.parametrize("fresh_settings", ["postgres"], indirect=True)
def test_a_new_events_vectors_are_read_by_key(memory: MemoryClient) -> None:
    """Retrieval reads the nodes and vectors of each new event after a write: the
    vector rows it reads are that event's, however many the person has (a join once
    let an unanalysed table's plan read every vector of the person per write)."""
    for start in range(0, 3_000, 1_000):
        notes = [{"content": f"note {n} about the allotment"} for n in range(start, start + 1_000)]
        memory.store_many(notes, user_id="grower")
    event_id = memory.store("the last note about the allotment", user_id="grower")
    memory.context.runner.run_pending()
    engine = memory.context.store.backend.engine
    with engine.begin() as conn:
        [(stream_id, embedder)] = conn.execute(
            sa.select(vectors.c.stream_id, vectors.c.embedder).distinct()
        )
    with engine.begin() as conn:
        # The server may still hold the last transaction's counts unreported: the
        # difference is this statement's.
        before = _vector_rows_read(conn)
        rows = VectorStore(conn).event_node_vectors(stream_id, [event_id], embedder)
        assert [row.event_id for row in rows] == [event_id]
        assert _vector_rows_read(conn) - before <= len(rows)
