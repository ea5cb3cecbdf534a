"""store and the read queries: get_event, get_events, get_event_nodes, get_node,
get_assertion_state; and what bad input gets (a typed ValueError, nothing written)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from eventstore import (
    ConflictError,
    InvalidEncodingError,
    InvalidInputError,
    MalformedIdError,
    Transaction,
)
from oblivio import LifecycleState, MemoryClient, Node, NodeType, Role, Scope, SourceType
from oblivio.errors import EvidenceUnavailableError, NodeUnavailableError
from projections import events as ev
from projections.model import INITIAL_CONFIDENCE, INITIAL_SALIENCE
from tests.conftest import WITH_CITUS
from tests.memory._support import (
    EVIDENCE_MESSAGE,
    nothing_written,
    rejects,
    remember,
    stream,
)
from tests.memory.conftest import settings_of_backend

# The memory operations hold on the Citus tier too: the ``memory`` fixture takes this.
memory_settings = pytest.fixture(params=WITH_CITUS)(settings_of_backend)

# -- store and read back ------------------------------------------------------------------


def test_store_returns_the_event_id_and_reads_back(memory: MemoryClient) -> None:
    event_id = memory.store(
        "I prefer window seats.",
        user_id="alice",
        scope="project",
        role=Role.ASSISTANT,
        session_id="trip-42",
        source_type="agent_inferred",
        node_type=NodeType.PREFERENCE,
        meta={"source": "chat", "confidence": 0.8},
    )

    assert isinstance(event_id, uuid.UUID)
    [recorded] = stream(memory, "alice")
    assert (recorded.event_id, recorded.type) == (event_id, ev.STORED)
    event = memory.get_event(event_id, user_id="alice")
    assert event is not None
    assert (event.id, event.user_id, event.content) == (event_id, "alice", "I prefer window seats.")
    assert (event.scope, event.role, event.session_id) == (Scope.PROJECT, Role.ASSISTANT, "trip-42")
    assert (event.source_type, event.node_type) == (SourceType.AGENT_INFERRED, NodeType.PREFERENCE)
    assert event.meta == {"source": "chat", "confidence": 0.8}
    assert event.version == 1
    assert memory.get_event(str(event_id)) == event  # operators read any owner's events


def test_a_stored_event_derives_one_active_node(memory: MemoryClient) -> None:
    event_id = memory.store("My cat is called Zebra.", user_id="alice", session_id="s1")

    [node] = memory.get_event_nodes(event_id, user_id="alice")
    assert (node.event_id, node.content) == (event_id, "My cat is called Zebra.")
    assert (node.node_type, node.scope, node.source_type) == (
        NodeType.FACT,
        Scope.PERSONAL,
        SourceType.USER_STATED,
    )
    assert node.lifecycle is LifecycleState.ACTIVE
    assert (node.confidence_base, node.salience_base) == (INITIAL_CONFIDENCE, INITIAL_SALIENCE)
    assert (node.reinforcement_boost, node.reinforcement_count) == (0.0, 0)
    assert node.session_id == "s1"
    assert node.superseded_by is None
    assert node.last_reinforced_at is None
    assert memory.get_node(node.id, user_id="alice") == node
    assert memory.get_node(str(node.id)) == node
    state = memory.get_assertion_state(node.id, user_id="alice")
    assert state is not None
    assert state.current
    assert (state.supersedes, state.contradicted_by, state.superseded_by) == ([], [], None)


def test_utf8_bytes_are_stored_as_text(memory: MemoryClient) -> None:
    event_id, node = remember(memory, "Café in Zürich".encode())  # type: ignore[arg-type]
    event = memory.get_event(event_id, user_id="alice")
    assert event is not None
    assert event.content == node.content == "Café in Zürich"


def test_store_with_a_request_id_is_idempotent(memory: MemoryClient) -> None:
    request = uuid.uuid4()
    first = memory.store("I live in Lyon.", user_id="alice", request_id=request)

    with nothing_written(memory):
        assert memory.store("I live in Lyon.", user_id="alice", request_id=str(request)) == first
    with nothing_written(memory), pytest.raises(ConflictError):
        memory.store("I live in Paris.", user_id="alice", request_id=request)
    other = memory.store("I live in Lyon.", user_id="bob", request_id=request)

    assert other != first  # request ids are scoped to the owner
    assert len(memory.get_event_nodes(first)) == 1


def test_unavailable_events_read_as_none(memory: MemoryClient) -> None:
    event_id, old = remember(memory, "I live in Lyon.")
    _, new = remember(memory, "I moved to Paris.")
    correction = memory.supersede(old.id, new.id, user_id="alice")

    assert memory.get_event(uuid.uuid4()) is None
    assert memory.get_event(event_id, user_id="bob") is None  # foreign: as if missing
    assert memory.get_event(correction.event_id, user_id="alice") is None  # not a memory
    assert memory.get_event_nodes(uuid.uuid4()) == []
    assert memory.get_event_nodes(event_id, user_id="bob") == []
    assert memory.get_node(uuid.uuid4()) is None
    assert memory.get_assertion_state(uuid.uuid4()) is None


# -- get_events ---------------------------------------------------------------------------


def test_get_events_pages_with_after_version(memory: MemoryClient) -> None:
    ids = []
    for i in range(7):
        event_id, node = remember(memory, f"fact number {i}")
        ids.append(event_id)
        memory.reinforce(node.id, user_id="alice")  # non-memory events in between

    pages, after = [], 0
    while page := memory.get_events(user_id="alice", after_version=after, limit=3):
        assert len(page) <= 3
        pages.append(page)
        after = page[-1].version

    assert [len(p) for p in pages] == [3, 3, 1]
    assert [e.id for p in pages for e in p] == ids
    assert [e.content for e in pages[1]] == ["fact number 3", "fact number 4", "fact number 5"]
    assert memory.get_events(user_id="alice", after_version=after) == []
    assert memory.get_events(user_id="nobody") == []


def test_get_events_filters(memory: MemoryClient) -> None:
    a = memory.store("a", user_id="alice", scope="project", session_id="s1")
    b = memory.store("b", user_id="alice", source_type="imported", session_id="s2")
    c = memory.store("c", user_id="alice", scope=Scope.PROJECT, source_type="imported")
    memory.store("d", user_id="bob", scope="project", session_id="s1")

    def ids(**filters: Any) -> list[uuid.UUID]:
        return [e.id for e in memory.get_events(user_id="alice", **filters)]

    assert ids() == [a, b, c]
    assert ids(scope="project") == [a, c]
    assert ids(session_id="s1") == [a]
    assert ids(source_type=SourceType.IMPORTED) == [b, c]
    assert ids(scope="project", source_type="imported") == [c]
    assert ids(scope="session") == []
    assert [e.id for e in memory.get_events(user_id="alice", scope="project", limit=1)] == [a]


def test_get_events_rejects_bad_paging(memory: MemoryClient) -> None:
    memory.store("a", user_id="alice")
    for paging in (
        {"limit": 0},
        {"limit": -1},
        {"limit": "10"},
        {"after_version": "3"},
        {"after_version": -1},
    ):
        rejects(memory, lambda p=paging: memory.get_events(user_id="alice", **p), InvalidInputError)


# -- bad input ----------------------------------------------------------------------------

BAD_STORES: list[tuple[str, dict[str, Any], type[ValueError]]] = [
    ("empty content", {"content": ""}, InvalidInputError),
    ("blank content", {"content": "  \n\t"}, InvalidInputError),
    ("invalid UTF-8", {"content": b"caf\xe9 \xff"}, InvalidEncodingError),
    ("lone surrogate", {"content": "bad \ud800 text"}, InvalidEncodingError),
    ("not text", {"content": 42}, InvalidInputError),
    ("too long", {"content": "x" * 100_001}, InvalidInputError),
    ("unknown scope", {"scope": "galaxy"}, InvalidInputError),
    ("unknown node type", {"node_type": "rumour"}, InvalidInputError),
    ("unknown source type", {"source_type": "hearsay"}, InvalidInputError),
    ("unknown role", {"role": "oracle"}, InvalidInputError),
    ("confidence above 1", {"meta": {"confidence": 1.01}}, InvalidInputError),
    ("confidence below 0", {"meta": {"confidence": -0.1}}, InvalidInputError),
    ("confidence not a number", {"meta": {"confidence": "high"}}, InvalidInputError),
    ("confidence a boolean", {"meta": {"confidence": True}}, InvalidInputError),
    ("nested meta object", {"meta": {"source": {"name": "erp"}}}, InvalidInputError),
    ("meta list value", {"meta": {"tags": ["a", "b"]}}, InvalidInputError),
    ("meta not finite", {"meta": {"score": float("inf")}}, InvalidInputError),
    ("meta key not text", {"meta": {1: "one"}}, InvalidInputError),
    ("meta not an object", {"meta": ["confidence", 1]}, InvalidInputError),
    ("empty user id", {"user_id": ""}, MalformedIdError),
    ("user id not text", {"user_id": None}, MalformedIdError),
    ("empty session id", {"session_id": ""}, InvalidInputError),
    ("malformed request id", {"request_id": "not-a-uuid"}, MalformedIdError),
]


def test_bad_store_input_gets_a_typed_error_and_writes_nothing(memory: MemoryClient) -> None:
    memory.store("an earlier memory", user_id="alice")  # the stream exists already
    for name, overrides, error in BAD_STORES:
        call: dict[str, Any] = {"content": "I like tea.", "user_id": "alice", **overrides}
        content = call.pop("content")
        caught = rejects(memory, lambda c=content, k=call: memory.store(c, **k), ValueError)
        assert type(caught) is error, f"{name}: {caught!r}"
    assert [e.content for e in memory.get_events(user_id="alice")] == ["an earlier memory"]


def test_bad_input_creates_no_stream(memory: MemoryClient) -> None:
    rejects(memory, lambda: memory.store("", user_id="carol"), InvalidInputError)
    assert memory.context.store.head(memory.context.namespace, "carol") is None


MALFORMED_IDS = ["not-a-uuid", "", "1234", 42, None]


def test_queries_reject_malformed_ids(memory: MemoryClient) -> None:
    memory.store("something", user_id="alice")
    for query in ("get_event", "get_event_nodes", "get_node", "get_assertion_state"):
        read = getattr(memory, query)
        for bad_id in MALFORMED_IDS:
            for user_id in ("alice", None):
                rejects(
                    memory, lambda r=read, b=bad_id, u=user_id: r(b, user_id=u), MalformedIdError
                )


def test_commands_treat_malformed_node_ids_as_unavailable(memory: MemoryClient) -> None:
    _, node = remember(memory, "I like tea.")
    for bad_id in MALFORMED_IDS:
        _refuse_node_id(memory, node, bad_id)


def _refuse_node_id(memory: MemoryClient, node: Node, bad_id: object) -> None:
    for call in (
        lambda: memory.supersede(bad_id, node.id, user_id="alice"),  # type: ignore[arg-type]
        lambda: memory.supersede(node.id, bad_id, user_id="alice"),  # type: ignore[arg-type]
        lambda: memory.contradict(node.id, bad_id, user_id="alice"),  # type: ignore[arg-type]
        lambda: memory.resolve_contradiction(bad_id, node.id),  # type: ignore[arg-type]
        lambda: memory.reinforce(bad_id, user_id="alice"),  # type: ignore[arg-type]
    ):
        rejects(memory, call, NodeUnavailableError)


def test_commands_treat_malformed_evidence_as_unavailable(memory: MemoryClient) -> None:
    _, old = remember(memory, "I like tea.")
    _, new = remember(memory, "I like coffee now.")
    for bad_id in ["not-a-uuid", "", 42, "00000000-0000-0000-0000-00000000000g"]:
        _refuse_evidence(memory, old, new, bad_id)


def _refuse_evidence(memory: MemoryClient, old: Node, new: Node, bad_id: object) -> None:
    for call in (
        lambda: memory.supersede(old.id, new.id, evidence_id=bad_id),  # type: ignore[arg-type]
        lambda: memory.contradict(old.id, new.id, evidence_id=bad_id),  # type: ignore[arg-type]
        lambda: memory.reinforce(old.id, evidence_id=bad_id),  # type: ignore[arg-type]
    ):
        rejects(memory, call, EvidenceUnavailableError, EVIDENCE_MESSAGE)


def test_commands_reject_unknown_well_formed_node_ids(memory: MemoryClient) -> None:
    _, node = remember(memory, "I like tea.")
    unknown = uuid.uuid4()
    for user_id in ("alice", None):
        for call in (
            lambda u=user_id: memory.supersede(unknown, node.id, user_id=u),
            lambda u=user_id: memory.supersede(node.id, unknown, user_id=u),
            lambda u=user_id: memory.contradict(node.id, unknown, user_id=u),
            lambda u=user_id: memory.reinforce(unknown, user_id=u),
        ):
            rejects(memory, call, NodeUnavailableError)


def test_reinforce_rejects_malformed_request_ids(memory: MemoryClient) -> None:
    _, node = remember(memory, "I like tea.")
    for bad_request in ("not-a-uuid", "", 7):
        rejects(
            memory,
            lambda b=bad_request: memory.reinforce(node.id, user_id="alice", request_id=b),
            MalformedIdError,
        )


def test_remove_resonance_trigger_rejects_malformed_ids(fresh_memory: MemoryClient) -> None:
    """A malformed trigger id must be refused before it reaches the log: once
    appended, the vector projection cannot apply it and stops at that event
    (for every stream of its partition), so it needs a database of its own."""
    memory = fresh_memory
    memory.context.consistency_timeout = 2.0
    memory.store("I like tea.", user_id="alice")
    rejects(memory, lambda: memory.remove_resonance_trigger("not-a-uuid", user_id="alice"))  # type: ignore[arg-type]
    assert memory.retrieve("tea", user_id="alice").nodes  # the vector state still advances


def test_a_second_store_appends_at_the_remembered_head_without_the_lock(
    memory: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's lock is taken for the first store of a person in this process, and
    again only when the remembered head was found elsewhere (on every backend, Citus's
    pipelined append included)."""
    locks: list[object] = []
    lock_stream = Transaction.lock_stream

    def counted(self: Transaction, *args: Any, **kwargs: Any) -> Any:
        locks.append(args[0])
        return lock_stream(self, *args, **kwargs)

    monkeypatch.setattr(Transaction, "lock_stream", counted)
    first = memory.store("Alice lives in Berlin", user_id="alice")
    assert len(locks) == 1
    second = memory.store("Alice moved to Paris", user_id="alice")
    many = memory.store_many([{"content": "Alice likes tea"}], user_id="alice")
    assert len(locks) == 1
    events = memory.get_events(user_id="alice")
    assert [e.id for e in events] == [first, second, many[0].event_id]
    assert [e.version for e in events] == [1, 2, 3]
    assert memory.context.store.verify(memory.context.namespace).ok
