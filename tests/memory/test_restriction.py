"""Restriction of processing (GDPR Art. 18), on both backends: while a person is
restricted no retrieval, extraction, likely-update or archiving path returns or touches their
memories, new writes for them are refused, and their export still holds them all."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import NewEvent, Subject, crypto
from eventstore.batch import SealedBatch, encode_batch, seal_batch
from eventstore.errors import SubjectRestrictedError
from eventstore.model import ANY
from eventstore.schema import streams
from eventstore.subject_rights import RESTRICTION_EVENTS, acting_on_restriction
from oblivio import MemoryClient
from tests.memory.conftest import Opener
from workers.archiving import Archiver

TEXTS = [
    "I drink green tea.",
    "My dog is called Rex.",
    "I live in Lyon.",
    "I play chess.",
    "I moved from Lyon to Porto last month.",  # what the likely-update detector judges
]
WRITES = st.lists(
    st.tuples(st.sampled_from(["store", "ingest"]), st.sampled_from(TEXTS)), min_size=1, max_size=4
)


def _write(memory: MemoryClient, kind: str, text: str, user: str) -> None:
    if kind == "store":
        memory.store(text, user_id=user)
    else:
        memory.ingest(text, user_id=user, first_person_owner=True)


def _drain_automated_paths(memory: MemoryClient) -> None:
    """Run what decides about a person without being asked: claim extraction, the
    likely-update detector and archiving (at capacity 1, a month later, so it would
    move something)."""
    ctx = memory.context
    ctx.extraction.run_pending()
    ctx.updates.run_pending()
    later = ctx.clock() + timedelta(days=30)
    Archiver(ctx.store, ctx.graph, ctx.scoring, 1, lambda: later).run()


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(before=WRITES, after=WRITES)
def test_nothing_automated_touches_a_restricted_person_and_export_keeps_everything(
    memory: MemoryClient, before: list[tuple[str, str]], after: list[tuple[str, str]]
) -> None:
    alice, bob = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    for kind, text in before:
        _write(memory, kind, text, alice)
        _write(memory, kind, text, bob)
    memory.restrict(alice, ground="art18-1-a", reference="T-1")
    ctx = memory.context
    head_at_restriction = ctx.store.head(ctx.namespace, alice)
    assert head_at_restriction is not None
    for kind, text in after:
        with pytest.raises(SubjectRestrictedError):
            _write(memory, kind, text, alice)
        _write(memory, kind, text, bob)
    _drain_automated_paths(memory)

    # Nothing was appended for alice since the restriction: no claims, no archiving.
    assert ctx.store.head(ctx.namespace, alice).version == head_at_restriction.version
    answer = memory.retrieve("tea dog Lyon chess", user_id=alice)
    assert answer.restricted
    assert answer.results == []
    assert memory.retrieve("tea dog Lyon chess", user_id=bob).results  # others are served

    exported = memory.export_subject(user_id=alice)
    stored = [e["data"]["content"] for e in exported["events"] if e["type"] == "memory.stored"]
    assert stored == [text for _, text in before]
    assert exported["nodes"]

    memory.lift_restriction(alice, reference="T-1")
    assert memory.retrieve("tea dog Lyon chess", user_id=alice).results
    types = [e.type for e in ctx.store.read_stream(ctx.namespace, alice)]
    assert [t for t in types if t in RESTRICTION_EVENTS] == [
        "subject.restricted",
        "subject.restriction_lifted",
    ]


def test_the_operator_acting_on_the_request_may_write(memory: MemoryClient) -> None:
    memory.store("I drink green tea.", user_id="alice")
    memory.restrict("alice", ground="art18-1-c", reference="T-2")
    with acting_on_restriction("T-2"):
        memory.store("I keep my receipts for the claim.", user_id="alice")
    with pytest.raises(SubjectRestrictedError):
        memory.store("Another thing.", user_id="alice")
    assert len(memory.export_subject(user_id="alice")["events"]) == 3  # two memories, one event


def test_restricting_twice_or_lifting_nothing_is_refused(memory: MemoryClient) -> None:
    memory.restrict("alice", ground="art18-1-a", reference="T-3")
    with pytest.raises(Exception, match="already restricted"):
        memory.restrict("alice", ground="art18-1-a", reference="T-3")
    memory.lift_restriction("alice", reference="T-3")
    with pytest.raises(LookupError):
        memory.lift_restriction("alice", reference="T-3")
    with pytest.raises(ValueError, match="reference"):
        memory.restrict("alice", ground="art18-1-a", reference="not a reference")
    with pytest.raises(ValueError, match="ground"):
        memory.restrict("alice", ground="because", reference="T-4")


def _sealed_at_head(memory: MemoryClient, user: str, *, past_restriction: bool) -> SealedBatch:
    """A note for ``user`` sealed at their stream's head as it is now, as a writer that
    read the head and has not written yet holds it."""
    store = memory.context.store
    with store.transaction() as tx:
        stream = tx.lock_stream(Subject(memory.context.namespace, user))
    assert stream is not None
    assert stream.wrapped_key is not None
    head = (stream.version, stream.chain_hash)
    encoded = encode_batch(store.codec, [NewEvent("test.note", {"n": stream.version})], ANY)
    dek = store.codec.unwrap(stream.wrapped_key)
    now = memory.context.clock()
    return seal_batch(
        store.codec,
        crypto.AeadKey(dek),
        stream.ref,
        head,
        encoded,
        now,
        past_restriction=past_restriction,
    )


def _written(memory: MemoryClient, batch: SealedBatch) -> bool:
    """Whether the backend's one append writes ``batch``, sent without the stream's lock."""
    backend = memory.context.store.backend
    with backend.append_connection() as conn:
        placements = backend.append(conn, batch, ())
    return placements is not None


def test_the_append_itself_refuses_a_restriction_that_came_after_its_head_was_read(
    memory: MemoryClient,
) -> None:
    # The restriction is on the stream row the append's conditional UPDATE moves
    # (not only in the register): a writer that read the head before the restriction
    # and writes after it, without the lock, writes nothing.
    memory.store("I drink green tea.", user_id="alice")
    sealed_before = _sealed_at_head(memory, "alice", past_restriction=False)
    memory.restrict("alice", ground="art18-1-a", reference="T-5")
    head = memory.context.store.head(memory.context.namespace, "alice")
    assert head is not None
    restricted_head = _sealed_at_head(memory, "alice", past_restriction=False)
    assert not _written(memory, restricted_head)  # the head is current: only the restriction
    assert not _written(memory, sealed_before)  # stale, and restricted
    assert memory.context.store.head(memory.context.namespace, "alice") == head

    # What may pass a restriction (its own events, an operator acting on it) is written.
    assert _written(memory, _sealed_at_head(memory, "alice", past_restriction=True))
    memory.lift_restriction("alice", reference="T-5")
    assert _written(memory, _sealed_at_head(memory, "alice", past_restriction=False))
    assert memory.context.store.verify(memory.context.namespace).ok


def test_a_forget_ends_the_restriction_on_the_stream_rows_too(memory: MemoryClient) -> None:
    memory.store("I drink green tea.", user_id="alice")
    memory.restrict("alice", ground="art18-1-b", reference="T-6")
    memory.forget("alice")
    memory.store("I drink coffee now.", user_id="alice")  # a new generation, unrestricted
    store = memory.context.store
    with store.backend.statement_reads() as conn:
        flags = conn.execute(
            sa.select(streams.c.generation, streams.c.restricted)
            .where(streams.c.subject_key == store.subject_key(memory.context.namespace, "alice"))
            .order_by(streams.c.generation)
        ).all()
    assert [tuple(row) for row in flags] == [(1, False), (2, False)]


def test_a_store_at_a_head_remembered_before_another_client_restricted_is_refused(
    reopen: Opener,
) -> None:
    """The head a process remembers carries no restriction: the append's own condition
    (the stream row's flag) refuses it, and the store raises as under the lock."""
    writer, officer = reopen(), reopen()
    writer.store("Alice likes tea", user_id="alice")  # the writer remembers the head
    officer.restrict("alice", ground="art18-1-a", reference="T-9")
    with pytest.raises(SubjectRestrictedError):
        writer.store("Alice likes coffee", user_id="alice")
    with pytest.raises(SubjectRestrictedError):
        writer.store_many([{"content": "Alice likes cake"}], user_id="alice")
    exported = officer.export_subject(user_id="alice")
    stored = [e["data"]["content"] for e in exported["events"] if e["type"] == "memory.stored"]
    assert stored == ["Alice likes tea"]
