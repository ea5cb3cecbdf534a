"""Random ingest / store / supersede / delete sequences replay to the live state.

One owner ingests first-person messages (some of which correct earlier ones),
stores plain memories, supersedes nodes by hand and deletes events.  After
every step, rebuilding the owner's projections from the log must give the
live digests, and no claim may outlive the message it came from.  SQLite
only: the replay path is the same code on both backends, and the two-backend
cases of ingest's erasure are in test_ingest_erasure.py.
"""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import strategies as st
from hypothesis.stateful import (
    invariant,
    precondition,
    rule,
)

from oblivio.errors import LifecycleConflictError
from tests.memory._machines import StoreMachine, run_machine

USER = "kim"
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


class IngestMachine(StoreMachine):
    prefix = "oblivio-ingest-stateful-"

    def __init__(self) -> None:
        super().__init__()
        self.events: list[uuid.UUID] = []  # live events, messages and stored memories
        self.claims: dict[uuid.UUID, uuid.UUID] = {}  # claim node -> its message

    @rule(text=st.sampled_from(MESSAGES), owner=st.booleans())
    def ingest(self, text: str, owner: bool) -> None:
        result = self.client.ingest(
            text, user_id=USER, first_person_owner=owner, wait_for_extraction=True
        )
        self.events.append(result.event_id)
        self.claims.update(dict.fromkeys(result.claim_node_ids or (), result.event_id))
        COUNTS["ingest"] += 1

    @rule(text=st.sampled_from(MESSAGES))
    def store(self, text: str) -> None:
        self.events.append(self.client.store(text, user_id=USER))

    @precondition(lambda self: len(self.claims) >= 2)
    @rule(data=st.data())
    def supersede(self, data: st.DataObject) -> None:
        old, new = data.draw(st.permutations(sorted(self.claims)))[:2]
        try:
            self.client.supersede(old, new, user_id=USER)
            COUNTS["supersede"] += 1
        except LifecycleConflictError:
            pass  # one of them is retired already: refused, nothing written

    @precondition(lambda self: bool(self.events))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        event_id = data.draw(st.sampled_from(self.events))
        self.client.delete_event(event_id, user_id=USER)
        self.events.remove(event_id)
        self.claims = {c: m for c, m in self.claims.items() if m != event_id}
        COUNTS["delete"] += 1

    @invariant()
    def replay_equals_live(self) -> None:
        for name, (live, replayed) in self.client.replay_comparison(user_id=USER).items():
            assert live == replayed, f"{name}: replay differs from live"

    @invariant()
    def claims_live_only_with_their_message(self) -> None:
        for event_id in self.events:
            for node in self.client.get_event_nodes(event_id, user_id=USER):
                if "claim_source_event_id" in node.meta:
                    assert node.meta["claim_source_event_id"] == str(event_id)
        for claim in self.claims:
            assert self.client.get_node(claim, user_id=USER, include_superseded=True)

    def final_check(self) -> None:
        self.replay_equals_live()


def test_random_ingest_sequences_replay_to_the_live_state() -> None:
    COUNTS.clear()
    run_machine(IngestMachine, examples=8, steps=10)
    assert COUNTS["ingest"] > 0
    assert COUNTS["delete"] > 0
    assert COUNTS["supersede"] > 0
