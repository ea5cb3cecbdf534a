"""delete_event re-derives only what the erased event reached, and the graph then equals
a fresh replay of what remains: random sequences, on both backends.

One person stores memories, puts keyed items (each put supersedes the item's
current revision), supersedes, contradicts, resolves and reinforces nodes
(sometimes citing another event as evidence), moves item expiries, ingests
first-person messages (whose claims share the owner's entity node) and deletes
events.  After every step, and before any rebuild job has run, each
projection's live digest must equal the digest of a fresh replay of the log.
"""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from oblivio import MemoryClient
from oblivio.errors import ConflictError, NotFoundError
from tests.memory._machines import run_machine

TEXTS = ("I use Vim.", "I live in Oslo.", "tea", "I don't use Vim anymore.", "coffee")
KEYS = ("a", "b", "c")
COUNTS: Counter[str] = Counter()


class DeleteMachine(RuleBasedStateMachine):
    client: MemoryClient  # the store every example shares (set by the test)

    def __init__(self) -> None:
        super().__init__()
        self.user = f"dee-{uuid.uuid4().hex[:12]}"
        self.events: list[uuid.UUID] = []  # live events that derive nodes
        self.nodes: dict[uuid.UUID, uuid.UUID] = {}  # node -> the event it came from

    def _derived(self, event_id: uuid.UUID) -> None:
        self.events.append(event_id)
        for node in self.client.get_event_nodes(event_id, user_id=self.user):
            self.nodes[node.id] = event_id

    @rule(text=st.sampled_from(TEXTS))
    def store(self, text: str) -> None:
        self._derived(self.client.store(text, user_id=self.user))

    @rule(key=st.sampled_from(KEYS), text=st.sampled_from(TEXTS))
    def put_item(self, key: str, text: str) -> None:
        self._derived(self.client.put_item(key, text, user_id=self.user).event_id)
        COUNTS["put_item"] += 1

    @rule(text=st.sampled_from(TEXTS))
    def ingest(self, text: str) -> None:
        message = self.client.ingest(
            text, user_id=self.user, first_person_owner=True, wait_for_extraction=True
        )
        self._derived(message.event_id)
        COUNTS["ingest"] += 1

    @precondition(lambda self: len(self.nodes) >= 2)
    @rule(
        data=st.data(),
        command=st.sampled_from(["supersede", "contradict", "resolve_contradiction"]),
        cite=st.booleans(),
    )
    def correct(self, data: st.DataObject, command: str, cite: bool) -> None:
        a, b = data.draw(st.permutations(sorted(self.nodes)))[:2]
        evidence = data.draw(st.sampled_from(self.events)) if cite else None
        try:
            getattr(self.client, command)(a, b, evidence_id=evidence, user_id=self.user)
            COUNTS[command] += 1
        except (ConflictError, NotFoundError, ValueError):
            pass  # refused (retired, not contradicting, other scope …): nothing written

    @precondition(lambda self: bool(self.nodes))
    @rule(data=st.data())
    def reinforce(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from(sorted(self.nodes)))
        try:
            self.client.reinforce(node, user_id=self.user)
            COUNTS["reinforce"] += 1
        except (ConflictError, NotFoundError, ValueError):
            pass

    @rule(key=st.sampled_from(KEYS), minutes=st.integers(1, 60))
    def move_expiry(self, key: str, minutes: int) -> None:
        until = datetime(2030, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)
        if self.client.set_item_expiry(key, until, user_id=self.user):
            COUNTS["move_expiry"] += 1

    @precondition(lambda self: bool(self.events))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        # Any event of the stream: a memory, an item revision, a message, its claims
        # event, a correction, a reinforcement, an expiry move.
        ctx = self.client.context
        live = [e for e in ctx.store.read_stream(ctx.namespace, self.user) if e.data is not None]
        erased = data.draw(st.sampled_from(live))
        self.client.delete_event(erased.event_id, user_id=self.user)  # no rebuild job runs
        if erased.event_id in self.events:
            self.events.remove(erased.event_id)
        self.nodes = {n: e for n, e in self.nodes.items() if e != erased.event_id}
        COUNTS["delete"] += 1
        COUNTS[f"delete {erased.type}"] += 1

    @invariant()
    def replay_equals_live(self) -> None:
        for name, (live, replayed) in self.client.replay_comparison(user_id=self.user).items():
            assert live == replayed, f"{name}: replay differs from live"


def test_deleting_events_leaves_what_a_replay_gives(memory: MemoryClient) -> None:
    COUNTS.clear()
    DeleteMachine.client = memory
    run_machine(DeleteMachine, examples=12, steps=14)
    # The runs did reach what they are about.
    assert COUNTS["delete"] >= 10
    assert COUNTS["supersede"] + COUNTS["contradict"] + COUNTS["reinforce"] >= 10
    assert COUNTS["put_item"] >= 5
    assert COUNTS["delete memory.superseded"] + COUNTS["delete memory.reinforced"] >= 2
