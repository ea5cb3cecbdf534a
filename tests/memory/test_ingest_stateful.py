"""Random ingest / store / supersede / delete sequences replay to the live state.

One owner ingests first-person messages (some of which correct earlier ones),
stores plain memories, supersedes nodes by hand and deletes events.  After
every step, rebuilding the owner's projections from the log must give the
live digests, no claim may outlive the message it came from, and an entity
node lives exactly while a live message names its identity.  SQLite only: the
replay path is the same code on both backends, and the two-backend cases of
ingest's erasure are in test_ingest_erasure.py.  The examples share one store
(opening one costs more than a whole example), each with an owner of its own.
"""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from oblivio import MemoryClient
from oblivio.errors import LifecycleConflictError
from oblivio.settings import Settings
from projections.model import NodeType
from tests.memory._machines import run_machine

MESSAGES = (
    "I use an insulin pump.",
    "I don't use a pump anymore.",
    "I use a breast pump.",
    "I have type 2 diabetes and I use Vim.",
    "I switched from Vim to Emacs.",
    "I live in Oslo.",
    "I moved from Oslo to Bergen.",
    "If it rains, I don't use the bus anymore.",
    "We own a boat.",
)
COUNTS: Counter[str] = Counter()


class IngestMachine(RuleBasedStateMachine):
    client: MemoryClient  # the store every example shares (set by the test)

    def __init__(self) -> None:
        super().__init__()
        self.user = f"kim-{uuid.uuid4().hex[:12]}"
        self.events: list[uuid.UUID] = []  # live events, messages and stored memories
        self.claims: dict[uuid.UUID, uuid.UUID] = {}  # claim node -> its message

    @rule(text=st.sampled_from(MESSAGES), owner=st.booleans())
    def ingest(self, text: str, owner: bool) -> None:
        result = self.client.ingest(
            text, user_id=self.user, first_person_owner=owner, wait_for_extraction=True
        )
        self.events.append(result.event_id)
        self.claims.update(dict.fromkeys(result.claim_node_ids or (), result.event_id))
        COUNTS["ingest"] += 1

    @rule(text=st.sampled_from(MESSAGES))
    def store(self, text: str) -> None:
        self.events.append(self.client.store(text, user_id=self.user))

    @precondition(lambda self: len(self.claims) >= 2)
    @rule(data=st.data())
    def supersede(self, data: st.DataObject) -> None:
        old, new = data.draw(st.permutations(sorted(self.claims)))[:2]
        try:
            self.client.supersede(old, new, user_id=self.user)
            COUNTS["supersede"] += 1
        except LifecycleConflictError:
            pass  # one of them is retired already: refused, nothing written

    @precondition(lambda self: bool(self.events))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        event_id = data.draw(st.sampled_from(self.events))
        self.client.delete_event(event_id, user_id=self.user)
        self.events.remove(event_id)
        self.claims = {c: m for c, m in self.claims.items() if m != event_id}
        COUNTS["delete"] += 1

    @invariant()
    def replay_equals_live(self) -> None:
        for name, (live, replayed) in self.client.replay_comparison(user_id=self.user).items():
            assert live == replayed, f"{name}: replay differs from live"

    @invariant()
    def claims_and_entities_live_only_with_their_messages(self) -> None:
        """The claims are exactly those of live messages, and the entities exactly
        the identities those claims bind beyond their message, each carried by a
        live message (one read of every node: the invariant runs after every step)."""
        page = self.client.list_nodes(user_id=self.user, include_superseded=True, limit=500)
        assert page.next_cursor is None
        claims = {n.id: n for n in page.nodes if "claim_source_event_id" in n.meta}
        assert set(claims) == set(self.claims)
        for node in claims.values():
            assert node.meta["claim_source_event_id"] == str(self.claims[node.id])
            assert node.event_id == self.claims[node.id]
        named = {
            uuid.UUID(n.meta["claim_subject_id"])
            for n in claims.values()
            if n.meta["claim_subject_kind"] != "event_local"
        }
        entities = [n for n in page.nodes if n.node_type is NodeType.ENTITY]
        assert {n.id for n in entities} == named
        assert all(n.event_id in self.events for n in entities)

    def teardown(self) -> None:
        if sys.exc_info()[0] is None:
            self.replay_equals_live()


def test_random_ingest_sequences_replay_to_the_live_state(tmp_path: Path) -> None:
    COUNTS.clear()
    with MemoryClient(settings=Settings(data_dir=tmp_path)) as client:
        IngestMachine.client = client
        run_machine(IngestMachine, examples=8, steps=10)
    assert COUNTS["ingest"] > 0
    assert COUNTS["delete"] > 0
    assert COUNTS["supersede"] > 0
