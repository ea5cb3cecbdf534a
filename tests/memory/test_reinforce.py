"""reinforce: fixed steps up to caps, and request ids that make retries safe.

Each confirmation adds 0.15 to the reinforcement boost (up to 0.5) and 0.05 to
the base confidence (up to 0.95); values already above a cap stay.  A request
id applies its confirmation once, across retries, restarts and concurrent
calls; reusing it for something else is refused; ids are per owner.
"""

from __future__ import annotations

import functools
import uuid
from datetime import UTC, datetime

import pytest

from oblivio import MemoryClient, Node
from oblivio.errors import EvidenceUnavailableError, IdempotencyConflictError, NodeUnavailableError
from oblivio.memory import commands
from oblivio.settings import Settings
from projections import events as ev
from projections import model as node_model
from projections.model import CONFIDENCE_CAP, INITIAL_CONFIDENCE, REINFORCEMENT_CAP
from tests._threads import race
from tests.memory._support import (
    EVIDENCE_MESSAGE,
    a_fact,
    current,
    events_of_type,
    nothing_written,
    rejects,
    remember,
)
from tests.memory.conftest import Opener

BOOSTS = [0.15, 0.30, 0.45, 0.5, 0.5, 0.5, 0.5]
CONFIDENCES = [0.75, 0.80, 0.85, 0.90, 0.95, 0.95, 0.95]


def test_each_confirmation_steps_up_to_the_caps(memory: MemoryClient) -> None:
    _, node = remember(memory, "I am allergic to peanuts.")

    confirmed = [memory.reinforce(node.id, user_id="alice") for _ in BOOSTS]

    assert [n.reinforcement_boost for n in confirmed] == pytest.approx(BOOSTS)
    assert [n.confidence_base for n in confirmed] == pytest.approx(CONFIDENCES)
    assert [n.reinforcement_count for n in confirmed] == list(range(1, len(BOOSTS) + 1))
    assert max(n.reinforcement_boost for n in confirmed) <= REINFORCEMENT_CAP
    assert max(n.confidence_base for n in confirmed) <= CONFIDENCE_CAP
    stored = current(memory, node)
    assert stored == confirmed[-1]
    assert stored.last_reinforced_at is not None
    state = memory.get_assertion_state(node.id, user_id="alice")
    assert state is not None
    assert (state.reinforcement_boost, state.confidence_base) == pytest.approx((0.5, 0.95))
    assert len(events_of_type(memory, "alice", ev.REINFORCED)) == len(BOOSTS)


def _node(boost: float, confidence: float) -> Node:
    return a_fact(confidence_base=confidence, reinforcement_boost=boost, reinforcement_count=3)


@pytest.mark.parametrize(
    ("boost", "confidence", "expected"),
    [
        (0.0, 0.7, (0.15, 0.75)),
        (0.45, 0.93, (0.5, 0.95)),
        (0.5, 0.95, (0.5, 0.95)),
        (0.8, 0.99, (0.8, 0.99)),  # above both caps: preserved
        (0.6, 0.2, (0.6, 0.25)),
        (0.1, 1.0, (0.25, 1.0)),
    ],
)
def test_the_confirmation_rule(
    boost: float, confidence: float, expected: tuple[float, float]
) -> None:
    """The rule itself (``commands._confirmed``): the public API cannot build a
    node above the caps, because new nodes start at fixed values."""
    now = datetime(2025, 6, 1, tzinfo=UTC)
    confirmed = commands._confirmed(_node(boost, confidence), now)
    assert (confirmed.reinforcement_boost, confirmed.confidence_base) == pytest.approx(expected)
    assert confirmed.reinforcement_count == 4
    assert confirmed.last_reinforced_at == confirmed.updated_at == now


def test_values_above_the_caps_survive_confirmation(
    memory: MemoryClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through the client: a node is built above the caps by changing
    the module constants for a while (a start value and a larger cap)."""
    monkeypatch.setattr(node_model, "INITIAL_CONFIDENCE", 0.98)
    _, node = remember(memory, "I am allergic to peanuts.")
    monkeypatch.setattr(commands, "REINFORCEMENT_CAP", 0.9)
    for _ in range(4):
        memory.reinforce(node.id, user_id="alice")
    monkeypatch.setattr(commands, "REINFORCEMENT_CAP", REINFORCEMENT_CAP)
    monkeypatch.setattr(node_model, "INITIAL_CONFIDENCE", INITIAL_CONFIDENCE)
    above = current(memory, node)
    assert (above.reinforcement_boost, above.confidence_base) == pytest.approx((0.6, 0.98))

    confirmed = memory.reinforce(node.id, user_id="alice")

    assert (confirmed.reinforcement_boost, confirmed.confidence_base) == pytest.approx((0.6, 0.98))
    assert confirmed.reinforcement_count == 5
    digests = memory.replay_comparison(user_id="alice")
    assert all(live == replayed for live, replayed in digests.values())


def test_evidence_is_checked_and_journaled(memory: MemoryClient) -> None:
    evidence, node = remember(memory, "I am allergic to peanuts.")
    foreign = memory.store("Bob's note.", user_id="bob")
    other_scope = memory.store("A project note.", user_id="alice", scope="project")

    for bad in (uuid.uuid4(), "not-a-uuid", foreign, other_scope):
        rejects(
            memory,
            lambda e=bad: memory.reinforce(node.id, evidence_id=e, user_id="alice"),
            EvidenceUnavailableError,
            EVIDENCE_MESSAGE,
        )
    assert current(memory, node).reinforcement_count == 0

    request = uuid.uuid4()
    memory.reinforce(node.id, evidence_id=evidence, user_id="alice", request_id=request)
    [journal] = events_of_type(memory, "alice", ev.REINFORCED)
    data = journal.data
    assert data is not None
    assert ev.checksum_ok(data)
    assert (data["evidence_id"], data["request_id"]) == (str(evidence), str(request))
    assert data["before"][str(node.id)]["reinforcement_boost"] == 0.0
    assert data["after"][str(node.id)]["reinforcement_boost"] == pytest.approx(0.15)


def test_a_retry_with_the_same_request_id_applies_once(memory: MemoryClient) -> None:
    evidence, node = remember(memory, "I am allergic to peanuts.")
    request = str(uuid.uuid4())
    first = memory.reinforce(node.id, evidence_id=evidence, user_id="alice", request_id=request)

    with nothing_written(memory):
        retried = [
            memory.reinforce(node.id, evidence_id=evidence, user_id="alice", request_id=request),
            memory.reinforce(
                str(node.id), evidence_id=str(evidence), request_id=uuid.UUID(request)
            ),
        ]

    assert retried == [first, first]  # same values, same timestamps
    assert current(memory, node) == first
    assert first.last_reinforced_at is not None
    assert len(events_of_type(memory, "alice", ev.REINFORCED)) == 1


def test_a_retry_returns_the_current_node_without_restoring_it(memory: MemoryClient) -> None:
    _, node = remember(memory, "I am allergic to peanuts.")
    request = uuid.uuid4()
    memory.reinforce(node.id, user_id="alice", request_id=request)
    later = memory.reinforce(node.id, user_id="alice")  # another confirmation

    with nothing_written(memory):
        replay = memory.reinforce(node.id, user_id="alice", request_id=request)

    assert replay == later == current(memory, node)
    assert replay.reinforcement_boost == pytest.approx(0.30)


def test_a_retry_is_a_no_op_after_reopening(memory: MemoryClient, reopen: Opener) -> None:
    _, node = remember(memory, "I am allergic to peanuts.")
    request = uuid.uuid4()
    first = memory.reinforce(node.id, user_id="alice", request_id=request)
    memory.close()

    restarted = reopen()
    with nothing_written(restarted):
        again = restarted.reinforce(node.id, user_id="alice", request_id=request)
    assert again == first
    rejects(
        restarted,
        lambda: restarted.reinforce(
            node.id, evidence_id=node.event_id, user_id="alice", request_id=request
        ),
        IdempotencyConflictError,
    )


def test_a_request_id_cannot_be_reused_for_another_request(memory: MemoryClient) -> None:
    evidence, node = remember(memory, "I am allergic to peanuts.")
    other_evidence, other = remember(memory, "I am allergic to cats.")
    request = uuid.uuid4()
    memory.reinforce(node.id, evidence_id=evidence, user_id="alice", request_id=request)

    for node_id, evidence_id in (
        (other.id, evidence),
        (other.id, None),
        (node.id, other_evidence),
        (node.id, None),
    ):
        rejects(
            memory,
            lambda n=node_id, e=evidence_id: memory.reinforce(
                n, evidence_id=e, user_id="alice", request_id=request
            ),
            IdempotencyConflictError,
        )
    assert current(memory, other).reinforcement_count == 0
    assert current(memory, node).reinforcement_count == 1


def test_calls_without_a_request_id_count_separately(memory: MemoryClient) -> None:
    _, node = remember(memory, "I am allergic to peanuts.")
    memory.reinforce(node.id, user_id="alice")
    memory.reinforce(node.id, user_id="alice")
    memory.reinforce(node.id, user_id="alice", request_id=uuid.uuid4())
    memory.reinforce(node.id, user_id="alice", request_id=uuid.uuid4())  # a new UUID: new
    assert current(memory, node).reinforcement_count == 4
    assert len(events_of_type(memory, "alice", ev.REINFORCED)) == 4


def test_request_ids_are_scoped_to_the_node_owner(memory: MemoryClient) -> None:
    _, alices = remember(memory, "Alice is allergic to peanuts.")
    _, bobs = remember(memory, "Bob is allergic to pollen.", user_id="bob")
    request = uuid.uuid4()
    memory.reinforce(alices.id, user_id="alice", request_id=request)

    bob_confirmed = memory.reinforce(bobs.id, user_id="bob", request_id=request)
    rejects(
        memory,
        lambda: memory.reinforce(alices.id, user_id="bob", request_id=request),
        NodeUnavailableError,
    )

    assert bob_confirmed.reinforcement_count == 1
    assert current(memory, alices).reinforcement_count == 1
    assert len(events_of_type(memory, "bob", ev.REINFORCED)) == 1


def test_a_retired_node_cannot_be_confirmed(memory: MemoryClient) -> None:
    _, old = remember(memory, "I live in Rome.")
    _, new = remember(memory, "I moved to Milan.")
    memory.supersede(old.id, new.id, user_id="alice")
    rejects(memory, lambda: memory.reinforce(old.id, user_id="alice"), NodeUnavailableError)
    rejects(memory, lambda: memory.reinforce(old.id), NodeUnavailableError)


THREADS = 8


def _race(clients: list[MemoryClient], node_id: uuid.UUID, request: uuid.UUID) -> list[object]:
    """Every client confirms the node with the same request id at the same moment."""
    return race(
        [
            functools.partial(c.reinforce, node_id, user_id="alice", request_id=request)
            for c in clients
        ],
        timeout=60,
    )


def test_concurrent_calls_with_one_request_id_count_once(fresh_settings: Settings) -> None:
    """Separate clients (connection pools) race; on PostgreSQL truly in parallel."""
    clients = [MemoryClient(settings=fresh_settings) for _ in range(THREADS)]
    try:
        _, node = remember(clients[0], "I am allergic to peanuts.")
        for _ in range(3):  # a few rounds: each must count exactly once
            request = uuid.uuid4()
            outcomes = _race(clients, node.id, request)
            errors = [o for o in outcomes if not isinstance(o, Node)]
            assert errors == []
        stored = current(clients[0], node)
        assert stored.reinforcement_count == 3
        assert stored.reinforcement_boost == pytest.approx(0.45)
        assert len(events_of_type(clients[0], "alice", ev.REINFORCED)) == 3
    finally:
        for client in clients:
            client.close()
