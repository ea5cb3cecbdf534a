"""Random sequences of changes said in plain words, confirmations, rejections and
erasures replay to the live state, on both backends.

One person stores and ingests memories some of which likely update earlier ones; the
machine confirms and rejects open likely updates and deletes events.  After every step
rebuilding the person's projections from the log must give the live digests, and every
open likely update must join two memories that both still exist.  The examples share one
store per backend (opening one costs more than an example), each with a person of its own.
"""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from oblivio import MemoryClient
from oblivio.errors import NoLikelyUpdateError
from tests.memory._machines import run_machine

#: An earlier memory and what may be said after it: a change, or something that is not one.
CHANGES = (
    ("I paddle a green kayak on the lake.", "I sold the kayak and swim in the lake now."),
    ("My gym is Ironworks.", "I cancelled Ironworks and joined the pool instead."),
    ("I live in Oslo.", "I finally moved to Bergen."),
    ("I paddle a green kayak on the lake.", "My brother sold his kayak."),
)
COUNTS: Counter[str] = Counter()


class LikelyUpdateMachine(RuleBasedStateMachine):
    client: MemoryClient  # the store every example of one backend shares (set by the test)

    def __init__(self) -> None:
        super().__init__()
        self.user = f"lu-{uuid.uuid4().hex[:12]}"
        self.events: list[uuid.UUID] = []
        self.nodes: dict[uuid.UUID, uuid.UUID] = {}  # the memory's node -> its event

    @rule(pair=st.sampled_from(CHANGES), ingested=st.booleans())
    def say(self, pair: tuple[str, str], ingested: bool) -> None:
        for text in pair:
            self._said(text, ingested)

    def _said(self, text: str, ingested: bool) -> None:
        if ingested:
            result = self.client.ingest(text, user_id=self.user, wait_for_extraction=True)
            event, [node] = result.event_id, result.note_node_ids
        else:
            event = self.client.store(text, user_id=self.user)
            [found] = self.client.get_event_nodes(event, user_id=self.user)
            node = found.id
            self.client.retrieve(text, user_id=self.user)  # a consistent read: judged
        self.events.append(event)
        self.nodes[node] = event

    @precondition(lambda self: bool(self.nodes))
    @rule(data=st.data(), confirm=st.booleans())
    def settle(self, data: st.DataObject, confirm: bool) -> None:
        # Mostly a memory that a newer one likely updates (so that settling happens),
        # sometimes any (so that refusals happen).
        pending = [n for n in sorted(self.nodes) if self._open(n)]
        anyone = not pending or data.draw(st.booleans())
        node = data.draw(st.sampled_from(sorted(self.nodes) if anyone else pending))
        call = self.client.confirm_likely_update if confirm else self.client.reject_likely_update
        try:
            call(node, user_id=self.user)
            COUNTS["confirm" if confirm else "reject"] += 1
        except NoLikelyUpdateError:
            COUNTS["refused"] += 1  # nothing open names it: refused, nothing written

    def _open(self, node: uuid.UUID) -> bool:
        state = self.client.get_assertion_state(node, user_id=self.user)
        decision = None if state is None else state.likely_updated_by
        return decision is not None and decision.status == "open"

    @precondition(lambda self: bool(self.events))
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        event = data.draw(st.sampled_from(self.events))
        self.client.delete_event(event, user_id=self.user)
        self.events.remove(event)
        self.nodes = {n: e for n, e in self.nodes.items() if e != event}
        COUNTS["delete"] += 1

    @invariant()
    def replay_equals_live(self) -> None:
        for name, (live, replayed) in self.client.replay_comparison(user_id=self.user).items():
            assert live == replayed, f"{name}: replay differs from live"

    @invariant()
    def open_decisions_join_live_memories(self) -> None:
        for node in self.nodes:
            state = self.client.get_assertion_state(node, user_id=self.user)
            assert state is not None
            decision = state.likely_updated_by
            if decision is not None:
                COUNTS["decided"] += 1
                assert decision.new_node_id in self.nodes


def test_random_likely_update_sequences_replay_to_the_live_state(memory: MemoryClient) -> None:
    """``memory`` is a store on each backend in turn (tests/memory/conftest.py)."""
    COUNTS.clear()
    LikelyUpdateMachine.client = memory
    run_machine(LikelyUpdateMachine, examples=6, steps=8)
    assert COUNTS["decided"] > 0
    assert COUNTS["confirm"] + COUNTS["reject"] > 0
    assert COUNTS["delete"] > 0
