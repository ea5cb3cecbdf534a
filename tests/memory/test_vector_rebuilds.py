"""Re-embedding jobs: blue/green per subject, leased units, erasure during a job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from eventstore.errors import ConflictError, InvalidInputError
from oblivio import MemoryClient
from oblivio.memory.vector_rebuilds import start_vector_rebuild, vector_rebuild
from oblivio.settings import Settings
from projections.embedders import HashingEmbedder
from projections.storage.embedder_store import recorded
from projections.storage.tables import nodes, vectors
from projections.storage.vector_store import VectorStore
from projections.store_embedders import EmbedderMismatchError, StoreEmbedders
from projections.vectors import VectorProjection
from workers.projector import ProjectionRunner
from workers.reembed import RebuildRequest, VectorRebuilder

ROOT = Path(__file__).resolve().parents[2]
ALICE = ["I work as a nurse", "I love pizza with olives", "My sister lives in Lyon"]
BOB = ["Bob drives a red car", "Bob prefers window seats", "Bob is allergic to nuts"]


def hashing_store(settings: Settings) -> MemoryClient:
    client = MemoryClient(settings=settings.model_copy(update={"embedder": "hashing"}))
    for user, texts in (("alice", ALICE), ("bob", BOB)):
        for text in texts:
            client.store(text, user_id=user)
        client.retrieve("anything", user_id=user)  # the vectors are written
    return client


def vector_counts(client: MemoryClient) -> dict[str, int]:
    query = sa.select(vectors.c.embedder, sa.func.count()).group_by(vectors.c.embedder)
    with client.context.store.backend.engine.connect() as conn:
        return {row[0]: row[1] for row in conn.execute(query)}


def top(client: MemoryClient, user: str, query: str) -> str:
    return client.retrieve(query, user_id=user, limit=1).results[0].node.content


class Counting:
    """An embedder that records what it embedded and can fail on a chosen call."""

    def __init__(self, inner: HashingEmbedder, before: Callable[[int], None] | None = None):
        self.inner, self.before = inner, before
        self.calls: list[list[str]] = []
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        if self.before is not None:
            self.before(len(self.calls))
        self.texts += texts
        return self.inner.embed(texts)


class Died(BaseException):
    """A worker process killed mid-batch: nothing after this point runs."""


def rebuilder(
    client: MemoryClient, embedder: Counting, worker: str, **kw: object
) -> VectorRebuilder:
    embedders = StoreEmbedders(embedder, "hashing:64")
    return VectorRebuilder(
        client.context.store,
        embedders,
        client.context.runner,
        client.context.clock,
        worker_id=worker,
        **kw,  # type: ignore[arg-type]
    )


def test_changing_the_embedder_is_blue_green_per_subject(fresh_settings: Settings) -> None:
    client = hashing_store(fresh_settings)
    started = start_vector_rebuild(client.context, embedder="wordllama:64", actor_id="ops")
    assert (started.status, started.subjects_total, started.nodes_total) == ("running", 2, 6)
    # Written during the job: the projection embeds it with both embedders.
    client.store("Alice has a cat named Miso", user_id="alice")
    client.retrieve("cat", user_id="alice")
    assert vector_counts(client) == {"hashing-v1-256": 7, "wordllama-l2_supercat-64": 1}
    assert top(client, "alice", "What is my profession?") != "I work as a nurse"  # still lexical

    assert client.context.reembedder.run_once()  # alice's unit (the lower stream id)
    assert top(client, "alice", "What is my profession?") == "I work as a nurse"
    # alice switched (her old vectors purged); bob is still served by hashing.
    assert vector_counts(client) == {"hashing-v1-256": 3, "wordllama-l2_supercat-64": 4}
    assert top(client, "bob", "window seats") == "Bob prefers window seats"
    halfway = vector_rebuild(client.context, started.rebuild_id)
    assert (halfway.status, halfway.subjects_done, halfway.nodes_embedded) == ("running", 1, 3)

    assert client.context.reembedder.run_pending() == 1
    done = vector_rebuild(client.context, started.rebuild_id)
    assert (done.status, done.subjects_done, done.nodes_embedded) == ("done", 2, 6)
    assert vector_counts(client) == {"wordllama-l2_supercat-64": 7}
    with client.context.store.reading() as view:
        roles = recorded(view.connection)
    assert set(roles) == {"current"}
    assert (roles["current"].name, roles["current"].spec) == (
        "wordllama-l2_supercat-64",
        "wordllama:64",
    )
    actions = [e.type for e in client.context.store.read_audit()]
    assert actions[-2:] == ["audit.vectors.rebuild.started", "audit.vectors.rebuild.finished"]
    client.close()

    with MemoryClient(settings=fresh_settings) as later:  # inherits the new embedder
        assert later.context.embedder.name == "wordllama-l2_supercat-64"
        assert top(later, "bob", "What does Bob drive?") == "Bob drives a red car"
    with pytest.raises(EmbedderMismatchError):
        MemoryClient(settings=fresh_settings.model_copy(update={"embedder": "hashing"}))


def test_a_killed_worker_s_unit_is_resumed_without_embedding_a_node_twice(
    fresh_settings: Settings,
) -> None:
    client = hashing_store(fresh_settings)
    rebuild_id = client.context.reembedder.start(RebuildRequest(embedder="hashing:64"))

    def die_on_second_batch(call: int) -> None:
        if call == 2:
            raise Died()

    first = Counting(HashingEmbedder(64), die_on_second_batch)
    with pytest.raises(Died):
        rebuilder(client, first, "worker-a", batch=2, lease=timedelta(seconds=30)).run_once()
    assert first.texts == ALICE[:2]  # one batch written, then killed with the next in flight

    later = client.context.clock() + timedelta(seconds=31)  # worker-a's lease has expired
    second = Counting(HashingEmbedder(64))
    taker = rebuilder(client, second, "worker-b", batch=2)
    taker.clock = lambda: later
    assert taker.run_pending() == 2  # alice's unit (taken over) and bob's
    assert sorted(first.texts + second.texts) == sorted(ALICE + BOB)  # each node once
    assert vector_rebuild(client.context, rebuild_id).status == "done"
    assert vector_counts(client) == {"hashing-v1-64": 6}
    client.close()


def test_forget_and_delete_during_a_re_embedding_lose_nothing_and_leave_nothing(
    fresh_settings: Settings,
) -> None:
    client = hashing_store(fresh_settings)
    deleted = client.store("Alice's door code is 4711", user_id="alice")
    client.retrieve("code", user_id="alice")
    client.context.reembedder.start(RebuildRequest(embedder="hashing:64"))

    def erase_while_embedding(call: int) -> None:
        if call == 1:  # alice's first batch is in flight: read, not yet written
            client.delete_event(deleted, user_id="alice", wait=True)
            client.forget("bob", wait=True)

    worker = rebuilder(client, Counting(HashingEmbedder(64), erase_while_embedding), "w", batch=50)
    assert worker.run_pending() == 2
    assert vector_counts(client) == {"hashing-v1-64": 3}  # alice's three remaining nodes
    with client.context.store.backend.engine.connect() as conn:
        orphans = conn.execute(
            sa.select(sa.func.count())
            .select_from(
                vectors.outerjoin(
                    nodes,
                    sa.and_(
                        nodes.c.stream_id == vectors.c.stream_id,
                        nodes.c.node_id == vectors.c.node_id,
                    ),
                )
            )
            .where(nodes.c.node_id.is_(None))
        ).scalar_one()
    assert orphans == 0
    results = [r.node.content for r in client.retrieve("door code", user_id="alice").results]
    assert sorted(results) == sorted(ALICE)
    assert client.retrieve("car", user_id="bob").results == []
    client.close()


def test_bad_rebuild_requests_are_refused_and_write_nothing(fresh_settings: Settings) -> None:
    client = hashing_store(fresh_settings)
    with pytest.raises(InvalidInputError, match="--all"):
        start_vector_rebuild(client.context, embedder="hashing:64", user_id="alice")
    with pytest.raises(ValueError, match="is not an embedder name"):
        start_vector_rebuild(client.context, embedder="word2vec")
    start_vector_rebuild(client.context, embedder="hashing:64")
    with pytest.raises(ConflictError, match="running"):
        start_vector_rebuild(client.context, embedder="hashing:32")
    # Re-embedding one subject with the store's own embedder fills gaps, switches nothing.
    repair = start_vector_rebuild(client.context, user_id="alice")
    assert (repair.scope, repair.embedder, repair.nodes_total) == ("subject", "hashing-v1-64", 3)
    with pytest.raises(LookupError):
        vector_rebuild(client.context, uuid.uuid4())
    client.close()


def test_a_worker_killed_with_sigkill_mid_job_is_resumed_by_another(
    fresh_settings: Settings,
) -> None:
    """A real process, killed between batches or in one: the next worker embeds what the
    dead one had not committed, and nothing it had."""
    client = MemoryClient(settings=fresh_settings.model_copy(update={"embedder": "hashing"}))
    texts = [f"note {i} about the garden" for i in range(40)]
    for text in texts:
        client.store(text, user_id="alice")
    client.retrieve("garden", user_id="alice")
    rebuild_id = client.context.reembedder.start(RebuildRequest(embedder="hashing:64"))
    victim = subprocess.Popen(
        [sys.executable, "-m", "tests.memory._reembed_victim", fresh_settings.model_dump_json()],
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while vector_rebuild(client.context, rebuild_id).nodes_embedded < 10:
            assert victim.poll() is None, "the victim died on its own"
            assert time.monotonic() < deadline, "the victim made no progress"
            time.sleep(0.05)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=10)
    finally:
        if victim.poll() is None:
            victim.kill()
    committed = vector_rebuild(client.context, rebuild_id).nodes_embedded
    assert 10 <= committed < len(texts)
    time.sleep(2.1)  # the victim's lease (2 s) expires
    survivor = Counting(HashingEmbedder(64))
    assert rebuilder(client, survivor, "survivor").run_pending() == 1
    assert len(survivor.texts) == len(texts) - committed  # nothing committed is redone
    done = vector_rebuild(client.context, rebuild_id)
    assert (done.status, done.nodes_embedded) == ("done", len(texts))
    assert vector_counts(client) == {"hashing-v1-64": len(texts)}
    client.close()


@pytest.mark.postgres
@pytest.mark.parametrize("first", ["alice", "carol"])
def test_a_projection_batch_in_flight_at_the_switch_leaves_no_old_vector(
    pg_settings: Settings, first: str
) -> None:
    """A projection batch that chose its embedders before the job switched its subject
    (alice's, first) or promoted the store (carol's, new since the job started,
    first) and commits after it: none of its old-embedder vectors, node or
    trigger, may outlive the switch.  Only a server database has the race:
    SQLite runs one writing transaction at a time."""
    client = hashing_store(pg_settings)
    rebuild_id = client.context.reembedder.start(RebuildRequest(embedder="hashing:64"))
    client.add_resonance_trigger(user_id="alice", text="bees", threshold=0.1)
    client.store("Carol keeps bees on her roof", user_id="carol")
    client.add_resonance_trigger(user_id="carol", text="bees", threshold=0.1)
    job = threading.Thread(target=client.context.reembedder.run_pending)

    def run_the_job(call: int) -> None:
        if call == 1:  # a batch has chosen its embedders: the job runs meanwhile
            job.start()
            deadline = time.monotonic() + 2  # the job waits for the batch, once fixed
            while job.is_alive() and time.monotonic() < deadline:
                time.sleep(0.02)

    serving = Counting(HashingEmbedder(256), run_the_job)  # the store's current embedder
    projection = VectorProjection(serving, embedders=StoreEmbedders(serving, "hashing"))
    runner = ProjectionRunner(client.context.store, projection)
    for user in (first, *({"alice", "carol"} - {first})):
        cursor = client.context.store.last_cursor("default", user)
        stream = client.context.store.head("default", user)
        assert cursor is not None
        assert stream is not None
        assert runner.catch_up(cursor, stream.stream.stream_id, 60)
    job.join(timeout=60)

    assert vector_rebuild(client.context, rebuild_id).status == "done"
    assert vector_counts(client) == {"hashing-v1-64": 7}  # 3 of alice, 3 of bob, 1 of carol
    for user in ("alice", "carol"):
        with client.context.store.reading() as view:
            head = client.context.store.head("default", user)
            assert head is not None
            cipher = view.cipher(head.stream.stream_id)
            assert cipher is not None
            [(_, body)] = VectorStore(view.connection).stream_triggers(cipher)
        assert len(body["vector"]) == 64, user
    assert top(client, "carol", "bees") == "Carol keeps bees on her roof"
    client.close()
