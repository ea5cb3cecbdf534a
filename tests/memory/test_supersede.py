"""supersede: explicit corrections, with the semantics of the memory-corrections spec.

Same owner and scope (also for operators), evidence checked against that owner
and scope, the SUPERSEDES edge from the new node to the old one, retired nodes
out of default reads, a checksummed journal event, and exact retries as
durable no-ops while changed retries are refused.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from eventstore import OblivioError
from oblivio import LifecycleState, MemoryClient, MemoryEngine
from oblivio.errors import (
    EvidenceUnavailableError,
    IdempotencyConflictError,
    LifecycleConflictError,
    NodeUnavailableError,
    OwnerScopeMismatchError,
)
from oblivio.memory.records import Correction
from oblivio.settings import Settings
from projections import events as ev
from projections.graph import state_to_json
from projections.storage.graph_store import STATE_COLUMNS, state_of
from tests._threads import race
from tests.conftest import WITH_CITUS
from tests.memory._support import (
    EVIDENCE_MESSAGE,
    current,
    events_of_type,
    nothing_written,
    rejects,
    remember,
)
from tests.memory.conftest import Opener, settings_of_backend

# The memory operations hold on the Citus tier too: the ``memory`` fixture takes this.
memory_settings = pytest.fixture(params=WITH_CITUS)(settings_of_backend)


def test_the_documented_correction_flow(memory: MemoryClient) -> None:
    old_event = memory.store("My current city is Boston.", user_id="alice")
    new_event = memory.store("I moved to Chicago.", user_id="alice")
    old_node = memory.get_event_nodes(old_event, user_id="alice")[0]
    new_node = memory.get_event_nodes(new_event, user_id="alice")[0]

    correction = memory.supersede(
        str(old_node.id), str(new_node.id), evidence_id=new_event, user_id="alice", actor_id="alice"
    )

    assert not correction.replayed
    assert correction.node_ids == (old_node.id, new_node.id)
    assert correction.evidence_id == new_event
    assert memory.get_node(str(old_node.id), user_id="alice") is None
    history = memory.get_node(str(old_node.id), user_id="alice", include_superseded=True)
    assert history is not None
    assert history.superseded_by == new_node.id
    assert history.lifecycle is LifecycleState.SUPERSEDED
    old = memory.get_event(old_event, user_id="alice")
    assert old is not None
    assert old.content == old_node.content == history.content == "My current city is Boston."


def test_the_supersedes_edge_points_from_new_to_old(memory: MemoryClient) -> None:
    _, old = remember(memory, "I work at Acme.")
    _, new = remember(memory, "I now work at Globex.")
    memory.supersede(old.id, new.id, user_id="alice")

    new_state = memory.get_assertion_state(new.id, user_id="alice")
    old_state = memory.get_assertion_state(old.id, user_id="alice")
    assert new_state is not None
    assert old_state is not None
    assert new_state.supersedes == [old.id]
    assert (new_state.lifecycle, new_state.superseded_by) == (LifecycleState.ACTIVE, None)
    assert old_state.supersedes == []
    assert (old_state.lifecycle, old_state.superseded_by) == (LifecycleState.SUPERSEDED, new.id)
    assert not old_state.current
    assert new_state.current


def test_the_retired_node_leaves_default_retrieval_only(memory: MemoryClient) -> None:
    old_event, old = remember(memory, "My favourite colour is green.")
    _, new = remember(memory, "My favourite colour is blue now.")
    memory.supersede(old.id, new.id, user_id="alice")

    default = memory.retrieve("favourite colour", user_id="alice")
    everything = memory.retrieve("favourite colour", user_id="alice", include_superseded=True)

    assert [n.id for n in default.nodes] == [new.id]
    assert {n.id for n in everything.nodes} == {old.id, new.id}
    [kept] = memory.get_event_nodes(old_event, user_id="alice")  # all lifecycles
    assert (kept.id, kept.lifecycle) == (old.id, LifecycleState.SUPERSEDED)
    assert memory.get_assertion_state(old.id, user_id="alice") is not None


def test_the_journal_event_holds_checksummed_before_and_after_snapshots(
    memory: MemoryClient,
) -> None:
    _, old = remember(memory, "I drive a Volvo.")
    evidence, new = remember(memory, "I sold the Volvo and bought a bike.")

    correction = memory.supersede(
        old.id, new.id, evidence_id=evidence, user_id="alice", actor_id="agent-7"
    )

    [journal] = events_of_type(memory, "alice", ev.SUPERSEDED)
    assert journal.type == "memory.superseded"
    assert journal.event_id == correction.event_id
    data = journal.data
    assert data is not None
    assert ev.checksum_ok(data)
    assert not ev.checksum_ok({**data, "actor_id": "someone-else"})
    assert (data["old_node_id"], data["new_node_id"]) == (str(old.id), str(new.id))
    assert (data["evidence_id"], data["actor_id"]) == (str(evidence), "agent-7")
    assert data["before"] == {str(old.id): _json_state(old), str(new.id): _json_state(new)}
    retired = current(memory, old)
    assert data["after"] == {str(old.id): _json_state(retired), str(new.id): _json_state(new)}
    for snapshot in (*data["before"].values(), *data["after"].values()):
        assert set(snapshot) == set(STATE_COLUMNS)  # complete states
    assert data["after"][str(old.id)]["lifecycle"] == "superseded"
    assert data["after"][str(old.id)]["superseded_by"] == str(new.id)
    assert "I drive a Volvo." not in str(data)  # snapshots hold state, not content


def _json_state(node: Any) -> dict[str, Any]:
    return state_to_json(state_of(node))


def test_an_exact_retry_is_a_no_op(memory: MemoryClient) -> None:
    _, old = remember(memory, "I live in Rome.")
    evidence, new = remember(memory, "I moved to Milan.")
    first = memory.supersede(old.id, new.id, evidence_id=evidence, user_id="alice", actor_id="a1")

    with nothing_written(memory):
        again = memory.supersede(
            str(old.id), str(new.id), evidence_id=str(evidence), user_id="alice", actor_id="a1"
        )
        as_operator = memory.supersede(old.id, new.id, evidence_id=evidence, actor_id="a1")

    assert again.replayed
    assert as_operator.replayed
    assert (again.operation_id, again.event_id) == (first.operation_id, first.event_id)
    assert as_operator.event_id == first.event_id
    assert current(memory, old).superseded_by == new.id


def test_an_exact_retry_is_a_no_op_after_reopening(memory: MemoryClient, reopen: Opener) -> None:
    _, old = remember(memory, "I live in Rome.")
    evidence, new = remember(memory, "I moved to Milan.")
    first = memory.supersede(old.id, new.id, evidence_id=evidence, user_id="alice", actor_id="a1")
    memory.close()

    restarted = reopen()
    with nothing_written(restarted):
        again = restarted.supersede(
            old.id, new.id, evidence_id=evidence, user_id="alice", actor_id="a1"
        )
    assert again.replayed
    assert again.event_id == first.event_id
    assert len(events_of_type(restarted, "alice", ev.SUPERSEDED)) == 1
    rejects(
        restarted,
        lambda: restarted.supersede(old.id, new.id, evidence_id=evidence, user_id="alice"),
        IdempotencyConflictError,
    )


def test_a_retry_that_changes_actor_or_evidence_is_refused(memory: MemoryClient) -> None:
    _, old = remember(memory, "I live in Rome.")
    evidence, new = remember(memory, "I moved to Milan.")
    other_evidence = memory.store("Milan it is, confirmed.", user_id="alice")
    memory.supersede(old.id, new.id, evidence_id=evidence, user_id="alice", actor_id="a1")

    changed: list[dict[str, Any]] = [
        {"evidence_id": evidence, "actor_id": "a2"},
        {"evidence_id": evidence, "actor_id": None},
        {"evidence_id": other_evidence, "actor_id": "a1"},
        {"evidence_id": None, "actor_id": "a1"},
    ]
    for change in changed:
        error = rejects(
            memory,
            lambda c=change: memory.supersede(old.id, new.id, user_id="alice", **c),
            IdempotencyConflictError,
        )
        assert isinstance(error, ValueError)
    assert current(memory, old).superseded_by == new.id


def test_a_retired_node_cannot_be_retired_again(memory: MemoryClient) -> None:
    _, old = remember(memory, "I live in Rome.")
    _, new = remember(memory, "I moved to Milan.")
    _, newer = remember(memory, "I moved to Turin.")
    memory.supersede(old.id, new.id, user_id="alice")

    rejects(memory, lambda: memory.supersede(old.id, newer.id), LifecycleConflictError)
    rejects(memory, lambda: memory.supersede(new.id, old.id), LifecycleConflictError)
    rejects(memory, lambda: memory.supersede(newer.id, old.id), LifecycleConflictError)
    rejects(memory, lambda: memory.supersede(new.id, new.id), LifecycleConflictError)
    memory.supersede(new.id, newer.id, user_id="alice")  # the chain moves on
    assert current(memory, new).superseded_by == newer.id


@pytest.mark.parametrize("user_id", ["alice", None], ids=["bound", "operator"])
def test_both_nodes_need_the_same_owner(memory: MemoryClient, user_id: str | None) -> None:
    _, mine = remember(memory, "I like jazz.")
    _, theirs = remember(memory, "I like metal.", user_id="bob")
    expected = NodeUnavailableError if user_id else OwnerScopeMismatchError

    rejects(memory, lambda: memory.supersede(mine.id, theirs.id, user_id=user_id), expected)
    rejects(memory, lambda: memory.supersede(theirs.id, mine.id, user_id=user_id), expected)
    assert current(memory, mine).lifecycle is LifecycleState.ACTIVE
    assert current(memory, theirs, "bob").lifecycle is LifecycleState.ACTIVE


@pytest.mark.parametrize("user_id", ["alice", None], ids=["bound", "operator"])
def test_both_nodes_need_the_same_scope(memory: MemoryClient, user_id: str | None) -> None:
    _, personal = remember(memory, "I like jazz.")
    _, project = remember(memory, "The project uses jazz samples.", scope="project")

    for old, new in ((personal, project), (project, personal)):
        rejects(
            memory,
            lambda o=old, n=new: memory.supersede(o.id, n.id, user_id=user_id),
            OwnerScopeMismatchError,
        )
    assert current(memory, personal).lifecycle is LifecycleState.ACTIVE


def _evidence_cases(memory: MemoryClient) -> dict[str, object]:
    """Evidence references that must all be refused for alice's personal nodes."""
    foreign = memory.store("Bob's note.", user_id="bob")
    other_scope = memory.store("A project note.", user_id="alice", scope="project")
    _, old = remember(memory, "Placeholder")
    _, new = remember(memory, "Placeholder too")
    journal = memory.supersede(old.id, new.id, user_id="alice").event_id
    return {
        "missing": uuid.uuid4(),
        "malformed": "not-an-event-id",
        "foreign owner": foreign,
        "foreign scope": other_scope,
        "not a memory event": journal,
    }


@pytest.mark.parametrize("user_id", ["alice", None], ids=["bound", "operator"])
def test_evidence_must_be_in_the_node_owner_and_scope(
    memory: MemoryClient, user_id: str | None
) -> None:
    _, old = remember(memory, "I live in Rome.")
    _, new = remember(memory, "I moved to Milan.")

    for name, evidence in _evidence_cases(memory).items():
        error = rejects(
            memory,
            lambda e=evidence: memory.supersede(old.id, new.id, evidence_id=e, user_id=user_id),
            EvidenceUnavailableError,
            EVIDENCE_MESSAGE,
        )
        assert type(error) is EvidenceUnavailableError, name
    assert current(memory, old).lifecycle is LifecycleState.ACTIVE
    assert memory.get_assertion_state(new.id, user_id="alice").supersedes == []  # type: ignore[union-attr]
    memory.supersede(old.id, new.id, user_id=user_id)  # omitting evidence is allowed
    assert current(memory, old).superseded_by == new.id


def _refusals(memory: MemoryClient, calls: list[Callable[[], object]]) -> list[tuple[type, str]]:
    """The (type, message) each call raises, asserting none writes anything."""
    seen = []
    for call in calls:
        with nothing_written(memory), pytest.raises(OblivioError) as caught:
            call()
        assert isinstance(caught.value, ValueError)
        seen.append((type(caught.value), str(caught.value)))
    return seen


def test_a_bound_caller_sees_foreign_nodes_as_missing(memory: MemoryClient) -> None:
    _, mine = remember(memory, "Bob likes chess.", user_id="bob")
    event_a, old = remember(memory, "Alice likes tennis.")
    _, new = remember(memory, "Alice likes padel now.")
    missing_a, missing_b = uuid.uuid4(), uuid.uuid4()

    foreign = _refusals(
        memory,
        [
            lambda: memory.supersede(old.id, new.id, user_id="bob"),
            lambda: memory.supersede(mine.id, old.id, user_id="bob"),
            lambda: memory.contradict(old.id, new.id, user_id="bob"),
            lambda: memory.reinforce(old.id, user_id="bob"),
            lambda: memory.supersede(old.id, new.id, user_id="nobody-yet"),
        ],
    )
    missing = _refusals(
        memory,
        [
            lambda: memory.supersede(missing_a, missing_b, user_id="bob"),
            lambda: memory.supersede(mine.id, missing_a, user_id="bob"),
            lambda: memory.contradict(missing_a, missing_b, user_id="bob"),
            lambda: memory.reinforce(missing_a, user_id="bob"),
            lambda: memory.supersede(missing_a, missing_b, user_id="nobody-yet"),
        ],
    )

    assert foreign == missing
    assert {kind for kind, _ in foreign} == {NodeUnavailableError}
    assert memory.get_node(old.id, user_id="bob") is None
    assert memory.get_node(old.id, user_id="bob", include_superseded=True) is None
    assert memory.get_assertion_state(old.id, user_id="bob") is None
    assert memory.get_event_nodes(event_a, user_id="bob") == []
    assert memory.get_event(event_a, user_id="bob") is None
    assert memory.context.store.head(memory.context.namespace, "nobody-yet") is None


def test_concurrent_corrections_of_one_node_apply_once(fresh_settings: Settings) -> None:
    """Clients race to retire the same node, each with its own replacement: the
    owner's stream is locked before the state is checked, so exactly one wins."""
    clients = [MemoryClient(settings=fresh_settings) for _ in range(4)]
    try:
        _, old = remember(clients[0], "I live in Rome.")
        replacements = [remember(clients[0], f"I moved to city {i}.")[1] for i in range(4)]
        outcomes = race(
            [
                functools.partial(c.supersede, old.id, new.id, user_id="alice")
                for c, new in zip(clients, replacements, strict=True)
            ],
            timeout=60,
        )

        applied = [o for o in outcomes if isinstance(o, Correction)]
        refused = [o for o in outcomes if isinstance(o, LifecycleConflictError)]
        assert (len(applied), len(refused)) == (1, len(clients) - 1), outcomes
        winner = applied[0].node_ids[1]
        assert current(clients[0], old).superseded_by == winner
        assert len(events_of_type(clients[0], "alice", ev.SUPERSEDED)) == 1
    finally:
        for client in clients:
            client.close()


def test_the_async_engine_awaits_the_same_operations(memory_settings: Settings) -> None:
    async def correct() -> tuple[Any, Any, Any]:
        async with MemoryEngine(settings=memory_settings) as engine:
            old_event = await engine.store("My current city is Boston.", user_id="alice")
            new_event = await engine.store("I moved to Chicago.", user_id="alice")
            [old] = await engine.get_event_nodes(old_event, user_id="alice")
            [new] = await engine.get_event_nodes(new_event, user_id="alice")
            await engine.supersede(old.id, new.id, evidence_id=new_event, user_id="alice")
            retry = await engine.supersede(old.id, new.id, evidence_id=new_event, user_id="alice")
            hidden = await engine.get_node(old.id, user_id="alice")
            history = await engine.get_node(old.id, user_id="alice", include_superseded=True)
            return retry, hidden, (history, new)

    retry, hidden, (history, new) = asyncio.run(correct())
    assert retry.replayed
    assert hidden is None
    assert history.superseded_by == new.id
