"""Random sequences of memory commands against a model of what they should do.

Two users store memories (in two scopes) and correct them: supersede,
contradict, resolve, reinforce (with and without request ids, with retries and
reused ids), triggers and attractors.  The machine predicts each command's
outcome (applied, replayed, or which error) from a small model and checks it;
after steps it compares the model's lifecycles, SUPERSEDES targets, open
contradictions and reinforcement counts with ``get_node`` and
``get_assertion_state``, and checks that replaying each user's log gives the
same projection digests as the live projections.

Retiring a node (by supersession or by losing a resolution) settles its open
contradictions; the model follows that rule too.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from eventstore import ConflictError, OblivioError
from eventstore.errors import NotFoundError
from oblivio import LifecycleState, Scope
from oblivio.errors import (
    EvidenceUnavailableError,
    IdempotencyConflictError,
    LifecycleConflictError,
    NodeUnavailableError,
    OwnerScopeMismatchError,
)
from tests.memory._machines import StoreMachine, run_machine

USERS = ("ann", "ben")
TEXTS = ("I live in Oslo.", "I moved to Bergen.", "My dog is called Rex.", "Coffee, black.")
KEYWORDS = ("Oslo", "Bergen", "Rex", "coffee")
REQUEST_IDS = tuple(uuid.UUID(int=i + 1) for i in range(3))
MISSING_EVENT = uuid.UUID(int=999)
FULL_CHECK_EVERY = 10
CORRECTIONS = ("supersede", "contradict", "resolve", "reinforce")

APPLY, REPLAY = "apply", "replay"
OUTCOMES: Counter[tuple[str, str]] = Counter()
Outcome = str | type[Exception]


@dataclass(frozen=True)
class Ref:
    """A stored memory: its owner, scope, event and (single) node."""

    user: str
    scope: Scope
    event_id: uuid.UUID
    node_id: uuid.UUID


Evidence = Ref | uuid.UUID | None
Caller = str  # "owner", "operator" or "stranger"


def _evidence_id(evidence: Evidence) -> uuid.UUID | None:
    return evidence.event_id if isinstance(evidence, Ref) else evidence


class MemoryMachine(StoreMachine):
    memories = Bundle("memories")
    # Mostly valid requests, so that corrections really apply and can be retried.
    evidences = st.one_of(st.none(), st.none(), memories, st.just(MISSING_EVENT))
    callers = st.sampled_from(["owner", "owner", "operator", "operator", "stranger"])
    scopes = st.sampled_from([Scope.PERSONAL, Scope.PERSONAL, Scope.PERSONAL, Scope.PROJECT])
    picks = st.integers(min_value=0, max_value=1_000)
    related = st.sampled_from([True, True, True, False])

    def __init__(self) -> None:
        super().__init__()
        self.refs: dict[uuid.UUID, Ref] = {}
        self.lifecycle: dict[uuid.UUID, LifecycleState] = {}
        self.superseded_by: dict[uuid.UUID, uuid.UUID] = {}
        self.open: set[frozenset[uuid.UUID]] = set()
        self.fresh_requests = 0
        self.operations: dict[tuple[str, Any], Any] = {}  # (owner, key) -> request
        self.stored: dict[tuple[str, uuid.UUID], tuple[str, Scope, uuid.UUID]] = {}
        self.reinforced: Counter[uuid.UUID] = Counter()
        self.attractors: Counter[str] = Counter()
        self.triggers: dict[str, list[uuid.UUID]] = {user: [] for user in USERS}
        self.touched: set[uuid.UUID] = set()
        self.history: list[tuple[str, dict[str, Any]]] = []  # applied corrections
        self.steps = 0

    # -- the model's predictions ------------------------------------------------------

    def _caller(self, caller: Caller, first: Ref) -> str | None:
        if caller == "operator":
            return None
        return first.user if caller == "owner" else next(u for u in USERS if u != first.user)

    def _owner_error(self, user_id: str | None, refs: list[Ref]) -> type[Exception] | None:
        owner = refs[0].user if user_id is None else user_id
        if any(r.user != owner for r in refs):
            return OwnerScopeMismatchError if user_id is None else NodeUnavailableError
        if len({r.scope for r in refs}) > 1:
            return OwnerScopeMismatchError
        return None

    def _evidence_ok(self, evidence: Evidence, node: Ref) -> bool:
        if evidence is None:
            return True
        if not isinstance(evidence, Ref):
            return False
        return (evidence.user, evidence.scope) == (node.user, node.scope)

    def _partner(self, first: Ref, pick: int, related: bool) -> Ref:
        """Another memory: usually one the first may be paired with (same owner and
        scope), sometimes any other; the first itself when there is no candidate."""
        others = [r for r in self.refs.values() if r.node_id != first.node_id]
        if related:
            others = [r for r in others if (r.user, r.scope) == (first.user, first.scope)]
        others.sort(key=lambda r: str(r.node_id))
        return others[pick % len(others)] if others else first

    def _retired(self, *refs: Ref) -> bool:
        return any(self.lifecycle[r.node_id] is LifecycleState.SUPERSEDED for r in refs)

    def _earlier(self, owner: str, key: Any, request: Any) -> Outcome | None:
        if (owner, key) not in self.operations:
            return None
        return REPLAY if self.operations[(owner, key)] == request else IdempotencyConflictError

    def _expect_correction(
        self, refs: list[Ref], user_id: str | None, key: Any, request: Any, evidence: Evidence
    ) -> Outcome:
        owner_error = self._owner_error(user_id, refs)
        if owner_error is not None:
            return owner_error
        earlier = self._earlier(refs[0].user, key, request)
        if earlier is not None:
            return earlier
        if not self._evidence_ok(evidence, refs[0]):
            return EvidenceUnavailableError
        return APPLY

    def _run(self, kind: str, expected: Outcome, call: Any, args: dict[str, Any]) -> None:
        """Call, and check the outcome against the prediction."""
        OUTCOMES[kind, expected if isinstance(expected, str) else expected.__name__] += 1
        if expected == APPLY:
            self.history.append((kind, args))
        if expected in (APPLY, REPLAY):
            result = call()
            replayed = getattr(result, "replayed", None)
            assert replayed in (None, expected == REPLAY)
            return
        with pytest.raises(OblivioError) as caught:
            call()
        assert type(caught.value) is expected, f"expected {expected}, got {caught.value!r}"
        assert isinstance(caught.value, ValueError)

    # -- rules --------------------------------------------------------------------------

    @initialize(target=memories)
    def seed(self) -> Any:
        """A few memories per user to start from: two scopes, all four texts."""
        refs = []
        for user in USERS:
            for i, text in enumerate(TEXTS):
                scope = Scope.PROJECT if i == len(TEXTS) - 1 else Scope.PERSONAL
                refs.append(self.store(user=user, text=text, scope=scope, request=None))
        return multiple(*refs)

    def _fresh_request(self) -> uuid.UUID:
        self.fresh_requests += 1
        return uuid.UUID(int=(1 << 100) + self.fresh_requests)

    @rule(
        target=memories,
        user=st.sampled_from(USERS),
        text=st.sampled_from(TEXTS),
        scope=scopes,
        request=st.one_of(st.none(), st.sampled_from(REQUEST_IDS)),
    )
    def store(self, user: str, text: str, scope: Scope, request: uuid.UUID | None) -> Any:
        earlier = None if request is None else self.stored.get((user, request))
        if earlier is not None and earlier[:2] != (text, scope):
            with pytest.raises(ConflictError):
                self.client.store(text, user_id=user, scope=scope, request_id=request)
            return multiple()
        # Without a caller key, a fresh counter-based one: the same "new memory"
        # semantics, but deterministic ids, so replayed examples draw the same
        # choices (random ids reorder nodes and make generation flaky).
        key = request if request is not None else self._fresh_request()
        event_id = self.client.store(text, user_id=user, scope=scope, request_id=key)
        if earlier is not None:
            assert event_id == earlier[2]
            return multiple()
        if request is not None:
            self.stored[(user, request)] = (text, scope, event_id)
        [node] = self.client.get_event_nodes(event_id, user_id=user)
        ref = Ref(user, scope, event_id, node.id)
        self.refs[node.id] = ref
        self.lifecycle[node.id] = LifecycleState.ACTIVE
        self.touched.add(node.id)
        return ref

    @rule(
        old=memories,
        pick=picks,
        related=related,
        evidence=evidences,
        caller=callers,
        actor=st.sampled_from([None, "agent"]),
    )
    def supersede(
        self,
        old: Ref,
        pick: int,
        related: bool,
        evidence: Evidence,
        caller: Caller,
        actor: str | None,
    ) -> None:
        new = self._partner(old, pick, related)
        self.do_supersede(old=old, new=new, evidence=evidence, caller=caller, actor=actor)

    def do_supersede(
        self, old: Ref, new: Ref, evidence: Evidence, caller: Caller, actor: str | None
    ) -> None:
        user_id = self._caller(caller, old)
        key = ("supersede", old.node_id, new.node_id)
        request = (_evidence_id(evidence), actor)
        if old.node_id == new.node_id:
            expected: Outcome = LifecycleConflictError
        else:
            expected = self._expect_correction([old, new], user_id, key, request, evidence)
            if expected == APPLY and self._retired(old, new):
                expected = LifecycleConflictError
        self._run(
            "supersede",
            expected,
            lambda: self.client.supersede(
                old.node_id,
                new.node_id,
                evidence_id=_evidence_id(evidence),
                user_id=user_id,
                actor_id=actor,
            ),
            {"old": old, "new": new, "evidence": evidence, "caller": caller, "actor": actor},
        )
        if expected == APPLY:
            self.lifecycle[old.node_id] = LifecycleState.SUPERSEDED
            self.superseded_by[old.node_id] = new.node_id
            self._settle_contradictions(old.node_id)
            self.operations[(old.user, key)] = request
        self.touched |= {old.node_id, new.node_id}

    def _settle_contradictions(self, retired: uuid.UUID) -> None:
        """A retired node's open contradictions end with it; a partner stays contested
        only while it has other open contradictions."""
        partners = {other for pair in self.open if retired in pair for other in pair - {retired}}
        self.open = {pair for pair in self.open if retired not in pair}
        for partner in partners:
            still_open = any(partner in pair for pair in self.open)
            if self.lifecycle[partner] is LifecycleState.CONTESTED and not still_open:
                self.lifecycle[partner] = LifecycleState.ACTIVE
        self.touched |= partners

    @rule(a=memories, pick=picks, related=related, evidence=evidences, caller=callers)
    def contradict(
        self, a: Ref, pick: int, related: bool, evidence: Evidence, caller: Caller
    ) -> None:
        b = self._partner(a, pick, related)
        self.do_contradict(a=a, b=b, evidence=evidence, caller=caller)

    def do_contradict(self, a: Ref, b: Ref, evidence: Evidence, caller: Caller) -> None:
        user_id = self._caller(caller, a)
        pair = frozenset({a.node_id, b.node_id})
        key = ("contradict", pair)
        request = _evidence_id(evidence)
        if a.node_id == b.node_id:
            expected: Outcome = LifecycleConflictError
        else:
            expected = self._expect_correction([a, b], user_id, key, request, evidence)
            if expected == APPLY and self._retired(a, b):
                expected = LifecycleConflictError
        self._run(
            "contradict",
            expected,
            lambda: self.client.contradict(
                a.node_id, b.node_id, evidence_id=request, user_id=user_id
            ),
            {"a": a, "b": b, "evidence": evidence, "caller": caller},
        )
        if expected == APPLY:
            self.lifecycle[a.node_id] = self.lifecycle[b.node_id] = LifecycleState.CONTESTED
            self.open.add(pair)
            self.operations[(a.user, key)] = request
        self.touched |= {a.node_id, b.node_id}

    @rule(winner=memories, pick=picks, related=related, evidence=evidences, caller=callers)
    def resolve(
        self, winner: Ref, pick: int, related: bool, evidence: Evidence, caller: Caller
    ) -> None:
        loser = self._partner(winner, pick, related)
        self.do_resolve(winner=winner, loser=loser, evidence=evidence, caller=caller)

    def do_resolve(self, winner: Ref, loser: Ref, evidence: Evidence, caller: Caller) -> None:
        user_id = self._caller(caller, winner)
        pair = frozenset({winner.node_id, loser.node_id})
        key = ("resolve", pair)
        request = (winner.node_id, _evidence_id(evidence))
        expected = self._expect_correction([winner, loser], user_id, key, request, evidence)
        if expected == APPLY and pair not in self.open:
            expected = LifecycleConflictError
        if expected == APPLY and self._retired(winner, loser):
            expected = LifecycleConflictError
        self._run(
            "resolve",
            expected,
            lambda: self.client.resolve_contradiction(
                winner.node_id, loser.node_id, evidence_id=_evidence_id(evidence), user_id=user_id
            ),
            {"winner": winner, "loser": loser, "evidence": evidence, "caller": caller},
        )
        if expected == APPLY:
            self.lifecycle[loser.node_id] = LifecycleState.SUPERSEDED
            self.superseded_by[loser.node_id] = winner.node_id
            self._settle_contradictions(loser.node_id)
            self.operations[(winner.user, key)] = request
        self.touched |= pair

    @precondition(lambda self: bool(self.open))
    @rule(pick=picks, swap=st.booleans(), evidence=evidences, caller=callers)
    def resolve_open(self, pick: int, swap: bool, evidence: Evidence, caller: Caller) -> None:
        """Resolve one of the open contradictions (random pairs rarely hit one)."""
        pairs = sorted(sorted(pair) for pair in self.open)
        winner, loser = pairs[pick % len(pairs)][:: -1 if swap else 1]
        self.do_resolve(
            winner=self.refs[winner], loser=self.refs[loser], evidence=evidence, caller=caller
        )

    @rule(
        node=memories,
        request=st.one_of(st.none(), st.sampled_from(REQUEST_IDS)),
        evidence=evidences,
        caller=callers,
    )
    def reinforce(
        self, node: Ref, request: uuid.UUID | None, evidence: Evidence, caller: Caller
    ) -> None:
        self.do_reinforce(node=node, request=request, evidence=evidence, caller=caller)

    def do_reinforce(
        self, node: Ref, request: uuid.UUID | None, evidence: Evidence, caller: Caller
    ) -> None:
        user_id = self._caller(caller, node)
        expected = self._owner_error(user_id, [node]) or APPLY
        key = ("reinforce", request)
        fingerprint = (node.node_id, _evidence_id(evidence))
        if expected == APPLY and request is not None:
            expected = self._earlier(node.user, key, fingerprint) or APPLY
        if expected == APPLY and not self._evidence_ok(evidence, node):
            expected = EvidenceUnavailableError
        if expected == APPLY and self._retired(node):
            expected = NodeUnavailableError
        self._run(
            "reinforce",
            expected,
            lambda: self.client.reinforce(
                node.node_id,
                evidence_id=_evidence_id(evidence),
                user_id=user_id,
                request_id=request,
            ),
            {"node": node, "request": request, "evidence": evidence, "caller": caller},
        )
        if expected == APPLY:
            self.reinforced[node.node_id] += 1
            if request is not None:
                self.operations[(node.user, key)] = fingerprint
        self.touched.add(node.node_id)

    @rule(pick=picks, change=st.sampled_from([None, None, "caller", "evidence", "actor"]))
    def retry(self, pick: int, change: str | None) -> None:
        """Repeat an applied correction exactly, or with one argument changed."""
        if not self.history:
            return
        kind, args = self.history[pick % len(self.history)]
        args = dict(args)
        if change == "caller":
            args["caller"] = "operator" if args["caller"] == "owner" else "owner"
        elif change == "evidence":
            args["evidence"] = None if args["evidence"] is not None else MISSING_EVENT
        elif change == "actor" and kind == "supersede":
            args["actor"] = None if args["actor"] else "agent"
        getattr(self, f"do_{kind}")(**args)

    @rule(
        user=st.sampled_from(USERS),
        action=st.sampled_from(
            ["add trigger", "remove trigger", "add attractor", "clear attractors"]
        ),
        word=st.sampled_from(KEYWORDS),
        weight=st.sampled_from([0.0, 1.0, 5.0]),
    )
    def retrieval_modifiers(self, user: str, action: str, word: str, weight: float) -> None:
        """Triggers and attractors; removing a removed trigger is refused, writing nothing."""
        if action == "add trigger":
            trigger = self.client.add_resonance_trigger(user_id=user, keyword=word, weight=weight)
            self.triggers[user].append(trigger)
        elif action == "remove trigger" and self.triggers[user]:
            trigger = self.triggers[user].pop(0)
            self.client.remove_resonance_trigger(trigger, user_id=user)
            if weight:  # sometimes try again: the trigger is gone now
                with pytest.raises(NotFoundError):
                    self.client.remove_resonance_trigger(trigger, user_id=user)
        elif action == "add attractor":
            self.client.add_negative_attractor(f"{word} again", user_id=user, severity=0.5)
            self.attractors[user] += 1
        elif action == "clear attractors":
            self.client.clear_negative_attractors(user_id=user)
            self.attractors[user] = 0

    # -- checks -------------------------------------------------------------------------

    @invariant()
    def model_agrees(self) -> None:
        self.steps += 1
        if self.steps % FULL_CHECK_EVERY == 0:
            self.check_everything()
        else:
            for node_id in self.touched:
                self.check_node(node_id)
        self.touched.clear()

    def check_node(self, node_id: uuid.UUID) -> None:
        ref = self.refs[node_id]
        lifecycle = self.lifecycle[node_id]
        visible = self.client.get_node(node_id, user_id=ref.user)
        node = self.client.get_node(node_id, include_superseded=True)
        state = self.client.get_assertion_state(node_id)
        assert node is not None
        assert state is not None
        assert (visible is None) == (lifecycle is LifecycleState.SUPERSEDED)
        assert node.lifecycle is state.lifecycle is lifecycle
        assert node.superseded_by == state.superseded_by == self.superseded_by.get(node_id)
        assert set(state.supersedes) == {
            old for old, new in self.superseded_by.items() if new == node_id
        }
        assert set(state.contradicted_by) == {
            other for pair in self.open if node_id in pair for other in pair - {node_id}
        }
        assert node.reinforcement_count == self.reinforced[node_id]
        assert node.reinforcement_boost == pytest.approx(min(0.15 * node.reinforcement_count, 0.5))

    def check_everything(self, *, final: bool = False) -> None:
        for node_id, ref in self.refs.items():
            self.check_node(node_id)
            if final:  # bound to the other user, every node reads as missing
                foreign = next(u for u in USERS if u != ref.user)
                assert (
                    self.client.get_node(node_id, user_id=foreign, include_superseded=True) is None
                )
                assert self.client.get_assertion_state(node_id, user_id=foreign) is None
        for user in USERS:
            assert self.client.negative_attractor_count(user_id=user) == self.attractors[user]
            for name, (live, replayed) in self.client.replay_comparison(user_id=user).items():
                assert live == replayed, f"{name} of {user}: replay differs from live"

    def final_check(self) -> None:
        self.check_everything(final=True)


def test_random_command_sequences_match_the_model_and_replay() -> None:
    OUTCOMES.clear()
    health_checks = (HealthCheck.too_slow, HealthCheck.filter_too_much)
    run_machine(MemoryMachine, examples=40, steps=20, health_checks=health_checks)
    # The runs must have changed state, not only met refusals.  (Which kinds of
    # correction get applied depends on generated ids, so per-kind coverage is
    # asserted by the deterministic tests in this directory, not here.)
    applied = sum(OUTCOMES[kind, APPLY] for kind in CORRECTIONS)
    assert applied > 0, f"no correction was ever applied: {OUTCOMES}"
