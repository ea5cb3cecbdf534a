"""supersede_many (all or nothing), contradict and resolve_contradiction.

The evidence rule of supersede applies to all three; a contradiction keeps
both nodes contested until it is resolved, and resolving it supersedes the
loser by the winner.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from oblivio import LifecycleState, MemoryClient, Node
from oblivio.errors import (
    EvidenceUnavailableError,
    IdempotencyConflictError,
    LifecycleConflictError,
    NodeUnavailableError,
    OwnerScopeMismatchError,
)
from projections import events as ev
from tests.memory._support import (
    EVIDENCE_MESSAGE,
    current,
    events_of_type,
    nothing_written,
    rejects,
    remember,
)


def _nodes(memory: MemoryClient, *texts: str, user_id: str = "alice") -> list[Node]:
    return [remember(memory, text, user_id)[1] for text in texts]


def _lifecycles(memory: MemoryClient, nodes: list[Node]) -> list[LifecycleState]:
    return [current(memory, n).lifecycle for n in nodes]


def _contradicted_twice(memory: MemoryClient) -> list[Node]:
    """Three meetings: the first contradicted by the second and by the third."""
    a, b, c = _nodes(memory, "Meeting on Monday.", "Meeting on Tuesday.", "Meeting on Friday.")
    memory.contradict(a.id, b.id, user_id="alice")
    memory.contradict(a.id, c.id, user_id="alice")
    return [a, b, c]


# -- supersede_many ---------------------------------------------------------------------


def test_supersede_many_applies_every_entry(memory: MemoryClient) -> None:
    evidence, a = remember(memory, "I am 30.")
    b, c, d = _nodes(memory, "I am 31.", "I drink tea.", "I drink coffee.")

    results = memory.supersede_many(
        [
            (a.id, b.id, evidence),
            {"old_node_id": str(c.id), "new_node_id": str(d.id)},
        ],
        user_id="alice",
        actor_id="agent",
    )

    assert [r.node_ids for r in results] == [(a.id, b.id), (c.id, d.id)]
    assert [r.replayed for r in results] == [False, False]
    assert (current(memory, a).superseded_by, current(memory, c).superseded_by) == (b.id, d.id)
    assert len(events_of_type(memory, "alice", ev.SUPERSEDED)) == 2
    with nothing_written(memory):
        again = memory.supersede_many(
            [(a.id, b.id, evidence), (c.id, d.id)], user_id="alice", actor_id="agent"
        )
    assert [r.replayed for r in again] == [True, True]


def _bad_batches(memory: MemoryClient, good: tuple[Node, Node], spare: Node) -> dict[str, Any]:
    """Second entries that must each abort the whole batch, with the error they raise."""
    foreign_event, foreign = remember(memory, "Bob's fact.", "bob")
    _, project = remember(memory, "A project fact.", scope="project")
    old, new = good
    return {
        "missing node": ((spare.id, uuid.uuid4()), NodeUnavailableError),
        "malformed node id": ((spare.id, "nope"), NodeUnavailableError),
        "foreign owner": ((spare.id, foreign.id), NodeUnavailableError),
        "foreign scope": ((spare.id, project.id), OwnerScopeMismatchError),
        "foreign evidence": ((spare.id, new.id, foreign_event), EvidenceUnavailableError),
        "missing evidence": ((spare.id, new.id, uuid.uuid4()), EvidenceUnavailableError),
        "old already retired by the batch": ((old.id, spare.id), LifecycleConflictError),
        "self": ((spare.id, spare.id), LifecycleConflictError),
        "not an entry": ((spare.id,), ValueError),
    }


def test_one_invalid_entry_aborts_the_whole_batch(memory: MemoryClient) -> None:
    old, new, spare = _nodes(memory, "I am 30.", "I am 31.", "I am 32.")

    for name, (entry, error) in _bad_batches(memory, (old, new), spare).items():
        batch = [(old.id, new.id), entry]
        caught = rejects(memory, lambda b=batch: memory.supersede_many(b, user_id="alice"), error)
        if error is EvidenceUnavailableError:
            assert str(caught) == EVIDENCE_MESSAGE, name
        assert _lifecycles(memory, [old, new, spare]) == [LifecycleState.ACTIVE] * 3, name
        state = memory.get_assertion_state(new.id, user_id="alice")
        assert state is not None
        assert state.supersedes == [], name
    assert events_of_type(memory, "alice", ev.SUPERSEDED) == []
    rejects(memory, lambda: memory.supersede_many([], user_id="alice"))


# -- contradict -------------------------------------------------------------------------


def test_a_contradiction_makes_both_nodes_contested(memory: MemoryClient) -> None:
    evidence, a = remember(memory, "My sister lives in Oslo.")
    _, b = remember(memory, "My sister lives in Bergen.")

    result = memory.contradict(a.id, b.id, evidence_id=evidence, user_id="alice", actor_id="me")

    assert not result.replayed
    assert _lifecycles(memory, [a, b]) == [LifecycleState.CONTESTED] * 2
    state_a = memory.get_assertion_state(a.id, user_id="alice")
    state_b = memory.get_assertion_state(b.id, user_id="alice")
    assert state_a is not None
    assert state_b is not None
    assert (state_a.contradicted_by, state_b.contradicted_by) == ([b.id], [a.id])
    assert not state_a.current
    found = memory.retrieve("Where does my sister live?", user_id="alice")
    assert {n.id for n in found.nodes} == {a.id, b.id}  # contested, not retired
    [journal] = events_of_type(memory, "alice", ev.CONTRADICTED)
    assert journal.data is not None
    assert ev.checksum_ok(journal.data)
    assert journal.data["evidence_id"] == str(evidence)


def test_contradict_retries(memory: MemoryClient) -> None:
    a, b = _nodes(memory, "My sister lives in Oslo.", "My sister lives in Bergen.")
    first = memory.contradict(a.id, b.id, user_id="alice", actor_id="me")

    with nothing_written(memory):
        same = memory.contradict(a.id, b.id, user_id="alice", actor_id="me")
        swapped = memory.contradict(b.id, a.id, actor_id="me")
    assert same.replayed
    assert swapped.replayed
    assert swapped.event_id == same.event_id == first.event_id
    rejects(
        memory,
        lambda: memory.contradict(a.id, b.id, user_id="alice", actor_id="you"),
        IdempotencyConflictError,
    )


@pytest.mark.parametrize("user_id", ["alice", None], ids=["bound", "operator"])
def test_contradictions_need_one_owner_and_scope(memory: MemoryClient, user_id: str | None) -> None:
    [mine] = _nodes(memory, "I like jazz.")
    [theirs] = _nodes(memory, "I like metal.", user_id="bob")
    _, project = remember(memory, "The project likes jazz.", scope="project")
    foreign = NodeUnavailableError if user_id else OwnerScopeMismatchError

    rejects(memory, lambda: memory.contradict(mine.id, theirs.id, user_id=user_id), foreign)
    rejects(
        memory,
        lambda: memory.contradict(mine.id, project.id, user_id=user_id),
        OwnerScopeMismatchError,
    )
    assert _lifecycles(memory, [mine, project]) == [LifecycleState.ACTIVE] * 2


def _evidence_refs(memory: MemoryClient) -> list[object]:
    foreign = memory.store("Bob's note.", user_id="bob")
    other_scope = memory.store("A project note.", user_id="alice", scope="project")
    return [uuid.uuid4(), "not-a-uuid", foreign, other_scope]


def test_contradict_and_resolve_check_evidence(memory: MemoryClient) -> None:
    a, b = _nodes(memory, "My sister lives in Oslo.", "My sister lives in Bergen.")

    for evidence in _evidence_refs(memory):
        rejects(
            memory,
            lambda e=evidence: memory.contradict(a.id, b.id, evidence_id=e, user_id="alice"),
            EvidenceUnavailableError,
            EVIDENCE_MESSAGE,
        )
    assert _lifecycles(memory, [a, b]) == [LifecycleState.ACTIVE] * 2

    memory.contradict(a.id, b.id, user_id="alice")
    for evidence in _evidence_refs(memory):
        rejects(
            memory,
            lambda e=evidence: memory.resolve_contradiction(a.id, b.id, evidence_id=e),
            EvidenceUnavailableError,
            EVIDENCE_MESSAGE,
        )
    assert _lifecycles(memory, [a, b]) == [LifecycleState.CONTESTED] * 2


# -- resolve_contradiction --------------------------------------------------------------


def test_resolution_supersedes_the_loser(memory: MemoryClient) -> None:
    a, b = _nodes(memory, "My sister lives in Oslo.", "My sister lives in Bergen.")
    evidence = memory.store("She confirmed: Bergen.", user_id="alice")
    memory.contradict(a.id, b.id, user_id="alice")

    result = memory.resolve_contradiction(b.id, a.id, evidence_id=evidence, user_id="alice")

    assert not result.replayed
    winner = memory.get_assertion_state(b.id, user_id="alice")
    loser = memory.get_assertion_state(a.id, user_id="alice")
    assert winner is not None
    assert loser is not None
    assert (winner.lifecycle, winner.supersedes, winner.contradicted_by) == (
        LifecycleState.ACTIVE,
        [a.id],
        [],
    )
    assert (loser.lifecycle, loser.superseded_by, loser.contradicted_by) == (
        LifecycleState.SUPERSEDED,
        b.id,
        [],
    )
    assert memory.get_node(a.id, user_id="alice") is None
    found = [n.id for n in memory.retrieve("Where does my sister live?", user_id="alice").nodes]
    assert b.id in found
    assert a.id not in found
    [journal] = events_of_type(memory, "alice", ev.CONTRADICTION_RESOLVED)
    assert journal.data is not None
    assert ev.checksum_ok(journal.data)
    with nothing_written(memory):
        assert memory.resolve_contradiction(b.id, a.id, evidence_id=evidence).replayed
    rejects(memory, lambda: memory.resolve_contradiction(b.id, a.id), IdempotencyConflictError)


def test_a_node_stays_contested_while_any_contradiction_is_open(memory: MemoryClient) -> None:
    nodes = a, b, c = _contradicted_twice(memory)

    memory.resolve_contradiction(a.id, b.id, user_id="alice")
    contested, superseded = LifecycleState.CONTESTED, LifecycleState.SUPERSEDED
    assert _lifecycles(memory, nodes) == [contested, superseded, contested]
    state = memory.get_assertion_state(a.id, user_id="alice")
    assert state is not None
    assert state.contradicted_by == [c.id]

    memory.resolve_contradiction(a.id, c.id, user_id="alice")
    assert _lifecycles(memory, nodes) == [LifecycleState.ACTIVE, superseded, superseded]
    state = memory.get_assertion_state(a.id, user_id="alice")
    assert state is not None
    assert (state.supersedes, state.contradicted_by) == ([b.id, c.id], [])


def test_resolve_needs_an_open_contradiction(memory: MemoryClient) -> None:
    a, b, c = _nodes(memory, "Meeting on Monday.", "Meeting on Tuesday.", "Meeting on Friday.")
    rejects(memory, lambda: memory.resolve_contradiction(a.id, b.id), LifecycleConflictError)
    memory.contradict(a.id, b.id, user_id="alice")
    rejects(memory, lambda: memory.resolve_contradiction(a.id, c.id), LifecycleConflictError)
    rejects(memory, lambda: memory.resolve_contradiction(a.id, a.id), LifecycleConflictError)
    assert _lifecycles(memory, [a, b, c]) == [
        LifecycleState.CONTESTED,
        LifecycleState.CONTESTED,
        LifecycleState.ACTIVE,
    ]


@pytest.mark.parametrize("a_wins", [True, False], ids=["win", "lose-again"])
def test_a_retired_node_cannot_settle_its_other_contradiction(
    memory: MemoryClient, a_wins: bool
) -> None:
    """a contradicts b and c; b wins over a.  a is retired, so it must neither come
    back to life by 'winning' its other, still open, contradiction with c, nor be
    superseded a second time by c."""
    a, b, c = _contradicted_twice(memory)
    memory.resolve_contradiction(b.id, a.id, user_id="alice")

    winner, loser = (a, c) if a_wins else (c, a)
    rejects(
        memory,
        lambda: memory.resolve_contradiction(winner.id, loser.id, user_id="alice"),
        LifecycleConflictError,
    )
    assert current(memory, a).lifecycle is LifecycleState.SUPERSEDED
    assert current(memory, a).superseded_by == b.id


def test_superseding_a_contested_node_settles_its_contradiction(memory: MemoryClient) -> None:
    """An explicit supersede between the two sides of an open contradiction decides
    it: the survivor must not stay contested by a node that is already retired."""
    a, b = _nodes(memory, "Meeting on Monday.", "Meeting on Tuesday.")
    memory.contradict(a.id, b.id, user_id="alice")

    memory.supersede(a.id, b.id, user_id="alice")

    state = memory.get_assertion_state(b.id, user_id="alice")
    assert state is not None
    assert state.supersedes == [a.id]
    assert state.contradicted_by == []
    assert state.lifecycle is LifecycleState.ACTIVE
