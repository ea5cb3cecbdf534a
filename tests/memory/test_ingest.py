"""ingest(): claims extracted from messages, and the seed's bounded retirement rules.

Every case runs on both backends through the public facade.  Messages are
ingested with ``wait_for_extraction=True``, so the extraction worker has
appended (and the graph applied) each message's plan before the next call.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from oblivio import MemoryClient
from oblivio.errors import IdempotencyConflictError
from oblivio.memory.ingest import IngestedMessage
from oblivio.settings import Settings
from projections import events as ev
from projections.claims.plan import IngestionPlan, Message
from projections.claims.rules import RuleClaimExtractor
from projections.model import ClaimState, LifecycleState, NodeType, SourceType
from tests.conftest import WITH_CITUS
from tests.memory._support import events_of_type, rejects

# The tests below marked with this run on the Citus tier too (each Citus test costs
# seconds, so the tier takes the ones that speak for the promise).
ALSO_ON_CITUS = pytest.mark.parametrize("memory_settings", WITH_CITUS, indirect=True)

USER = "sam"


def said(memory: MemoryClient, text: str, **fields: Any) -> IngestedMessage:
    fields.setdefault("first_person_owner", True)
    return memory.ingest(text, user_id=USER, wait_for_extraction=True, **fields)


def claim_of(memory: MemoryClient, message: IngestedMessage, index: int = 0) -> ClaimState:
    assert message.claim_node_ids
    state = memory.get_assertion_state(message.claim_node_ids[index], user_id=USER)
    assert state is not None
    assert state.claim is not None
    return state.claim


def lifecycle(memory: MemoryClient, message: IngestedMessage, index: int = 0) -> LifecycleState:
    assert message.claim_node_ids
    state = memory.get_assertion_state(message.claim_node_ids[index], user_id=USER)
    assert state is not None
    return state.lifecycle


def extract_all(memory: MemoryClient) -> None:
    """Let the extraction worker pass the user's last event (a server's log shows
    a commit to readers only once older transactions settled, so poll)."""
    ctx = memory.context
    head = ctx.store.head(ctx.namespace, USER)
    cursor = ctx.store.last_cursor(ctx.namespace, USER)
    assert head is not None
    assert cursor is not None
    assert ctx.extraction.catch_up(cursor, head.stream.stream_id, 10.0)


def replay_equal(memory: MemoryClient) -> None:
    for name, (live, fresh) in memory.replay_comparison(user_id=USER).items():
        assert live == fresh, name


@ALSO_ON_CITUS
def test_the_insulin_pump_example(memory: MemoryClient) -> None:
    first = said(memory, "I use an insulin pump.")
    second = said(memory, "I don't use an insulin pump anymore.")
    response = memory.retrieve(
        "What treatment do I use?",
        user_id=USER,
        exclude_node_types={NodeType.NOTE, NodeType.ENTITY},
        source_types={SourceType.USER_STATED},
    )
    assert [n.id for n in response.nodes] == list(second.claim_node_ids or ())
    [old_id] = first.claim_node_ids or ()
    state = memory.get_assertion_state(old_id, user_id=USER)
    assert state is not None
    assert state.claim is not None
    assert state.lifecycle is LifecycleState.SUPERSEDED
    assert state.superseded_by == (second.claim_node_ids or ())[0]
    assert state.claim.object == "insulin pump"
    assert state.claim.polarity == "positive"
    newer = claim_of(memory, second)
    assert newer.polarity == "negative"
    assert newer.temporal_intent == "update"
    assert newer.correction == "retired"
    assert state.claim.valid_to == newer.valid_from
    # Retired, not deleted: excluded by default, shown on request; notes stay.
    assert memory.get_node(old_id, user_id=USER) is None
    assert memory.get_node(old_id, user_id=USER, include_superseded=True) is not None
    everything = memory.retrieve("insulin pump", user_id=USER, include_superseded=True)
    assert old_id in {n.id for n in everything.nodes}
    assert memory.get_event(first.event_id, user_id=USER) is not None
    replay_equal(memory)


def test_a_retirement_is_a_journaled_supersede(memory: MemoryClient) -> None:
    first = said(memory, "I use an insulin pump.")
    second = said(memory, "I no longer use an insulin pump.")
    [plan] = [
        e
        for e in events_of_type(memory, USER, ev.CLAIMS_EXTRACTED)
        if e.event_id == second.plan_event_id
    ]
    assert plan.data is not None
    assert ev.checksum_ok(plan.data)
    [record] = plan.data["retirements"]
    assert ev.checksum_ok(record)
    assert record["old_node_id"] == str((first.claim_node_ids or ())[0])
    assert record["evidence_id"] == str(second.event_id)
    assert (
        set(record["before"])
        == set(record["after"])
        == {
            record["old_node_id"],
            record["new_node_id"],
        }
    )
    assert record["after"][record["old_node_id"]]["lifecycle"] == "superseded"
    saved = plan.data["plan"]
    assert saved["extractor"] == "oblivio.rules.en"
    assert saved["plan_version"] == 1
    assert len(saved["checksum"]) == 64


def test_pump_identifies_insulin_pump(memory: MemoryClient) -> None:
    first = said(memory, "I use an insulin pump.")
    second = said(memory, "I don't use a pump anymore.")
    assert lifecycle(memory, first) is LifecycleState.SUPERSEDED
    assert claim_of(memory, second).correction == "retired"


@pytest.mark.parametrize(
    ("before", "correction"),
    [
        ("I have 2 cats.", "I don't have cats anymore."),  # numbers are never shortened
        ("I use a toothbrush.", "I don't use a brush anymore."),  # nor partial words
    ],
)
def test_what_is_never_shortened(memory: MemoryClient, before: str, correction: str) -> None:
    first = said(memory, before)
    second = said(memory, correction)
    assert lifecycle(memory, first) is LifecycleState.ACTIVE
    assert claim_of(memory, second).correction == "no_match"


def test_two_distinct_matches_retire_none(memory: MemoryClient) -> None:
    insulin = said(memory, "I use an insulin pump.")
    breast = said(memory, "I use a breast pump.")
    correction = said(memory, "I don't use a pump anymore.")
    assert lifecycle(memory, insulin) is LifecycleState.ACTIVE
    assert lifecycle(memory, breast) is LifecycleState.ACTIVE
    assert claim_of(memory, correction).correction == "ambiguous"
    [plan] = [
        e
        for e in events_of_type(memory, USER, ev.CLAIMS_EXTRACTED)
        if e.event_id == correction.plan_event_id
    ]
    assert plan.data is not None
    [unretired] = plan.data["unretired"]
    assert unretired["reason"] == "ambiguous"
    expected = {str(i) for m in (insulin, breast) for i in m.claim_node_ids or ()}
    assert set(unretired["candidates"]) == expected


@pytest.mark.parametrize("statement", ["I have a Toyota.", "I own a Toyota.", "I like Toyota."])
def test_switched_to_never_replaces_has_owns_likes(memory: MemoryClient, statement: str) -> None:
    first = said(memory, statement)
    said(memory, "I switched from Toyota to Honda.")
    assert lifecycle(memory, first) is LifecycleState.ACTIVE


def test_switched_to_replaces_what_one_uses(memory: MemoryClient) -> None:
    first = said(memory, "I use Vim.")
    second = said(memory, "I switched from Vim to Emacs.")
    assert lifecycle(memory, first) is LifecycleState.SUPERSEDED
    assert claim_of(memory, second).replaces_object == "Vim"


def test_a_positive_update_needs_a_named_replacement(memory: MemoryClient) -> None:
    boston = said(memory, "I live in Boston.")
    said(memory, "I moved to Chicago.")
    assert lifecycle(memory, boston) is LifecycleState.ACTIVE
    said(memory, "I moved from Boston to Chicago.")
    assert lifecycle(memory, boston) is LifecycleState.SUPERSEDED


def test_conditions_block_retirement(memory: MemoryClient) -> None:
    first = said(memory, "I use the bus.")
    second = said(memory, "If it rains, I don't use the bus anymore.")
    assert lifecycle(memory, first) is LifecycleState.ACTIVE
    claim = claim_of(memory, second)
    assert claim.correction == "conditional"
    assert claim.conditions == ("If it rains",)


def test_an_earlier_effective_correction_leaves_a_later_claim(memory: MemoryClient) -> None:
    later = said(memory, "I live in Boston.", occurred_at=datetime(2026, 6, 1, tzinfo=UTC))
    said(memory, "I no longer live in Boston.", occurred_at=datetime(2026, 1, 1, tzinfo=UTC))
    assert lifecycle(memory, later) is LifecycleState.ACTIVE
    said(memory, "I no longer live in Boston.", occurred_at=datetime(2026, 7, 1, tzinfo=UTC))
    assert lifecycle(memory, later) is LifecycleState.SUPERSEDED
    assert claim_of(memory, later).valid_to == datetime(2026, 7, 1, tzinfo=UTC)


def test_an_unrelated_diagnosis_survives_a_treatment_correction(memory: MemoryClient) -> None:
    note = said(memory, "I have type 2 diabetes and I use an insulin pump.")
    assert len(note.claim_node_ids or ()) == 2
    said(memory, "I don't use an insulin pump anymore.")
    assert claim_of(memory, note, 0).object == "type 2 diabetes"
    assert lifecycle(memory, note, 0) is LifecycleState.ACTIVE
    assert lifecycle(memory, note, 1) is LifecycleState.SUPERSEDED
    [source] = note.note_node_ids
    assert memory.get_node(source, user_id=USER) is not None  # the raw note stays


def test_without_a_declaration_first_person_stays_event_local(memory: MemoryClient) -> None:
    first = said(memory, "I use an insulin pump.", first_person_owner=False)
    said(memory, "I don't use an insulin pump anymore.", first_person_owner=False)
    assert lifecycle(memory, first) is LifecycleState.ACTIVE
    assert claim_of(memory, first).subject_kind == "event_local"
    # A later declaration does not merge the old event-local identity either.
    said(memory, "I don't use an insulin pump anymore.")
    assert lifecycle(memory, first) is LifecycleState.ACTIVE


def test_named_speakers_bind_with_speaker_references(memory: MemoryClient) -> None:
    named = {"first_person_owner": False, "speaker": "Dana", "enable_speaker_references": True}
    first = said(memory, "I use Vim.", **named)
    said(memory, "I use Vim.", first_person_owner=False, speaker="Dana")  # not enabled
    said(memory, "I don't use Vim anymore.", **named)
    assert lifecycle(memory, first) is LifecycleState.SUPERSEDED
    assert claim_of(memory, first).subject_kind == "speaker"


def test_plural_references_stay_event_local(memory: MemoryClient) -> None:
    first = said(memory, "We own a boat.")
    said(memory, "We don't own a boat anymore.")
    assert lifecycle(memory, first) is LifecycleState.ACTIVE
    assert claim_of(memory, first).subject_kind == "event_local"


def test_mine_binds_the_owner_and_ours_stays_event_local(memory: MemoryClient) -> None:
    bike = said(memory, "The blue bike is mine.")
    assert claim_of(memory, bike).subject_kind == "owner"
    assert claim_of(memory, bike).predicate == "owns"
    said(memory, "The blue bike is no longer mine.")
    assert lifecycle(memory, bike) is LifecycleState.SUPERSEDED
    boat = said(memory, "The boat is ours.")
    said(memory, "The boat is no longer ours.")
    assert lifecycle(memory, boat) is LifecycleState.ACTIVE
    assert claim_of(memory, boat).subject_kind == "event_local"


def test_the_owner_identity_is_per_scope(memory: MemoryClient) -> None:
    personal = said(memory, "I use Vim.")
    said(memory, "I don't use Vim anymore.", scope="project")
    assert lifecycle(memory, personal) is LifecycleState.ACTIVE


def test_store_produces_no_claims(memory: MemoryClient) -> None:
    event_id = memory.store("I use an insulin pump.", user_id=USER)
    extract_all(memory)
    assert len(memory.get_event_nodes(event_id, user_id=USER)) == 1
    assert events_of_type(memory, USER, ev.CLAIMS_EXTRACTED) == []


def test_the_message_is_a_note_and_the_declaration_reserved_metadata(memory: MemoryClient) -> None:
    message = memory.ingest("I use Vim.", user_id=USER, first_person_owner=True, meta={"k": 1})
    assert message.claim_node_ids is None  # not waited for
    event = memory.get_event(message.event_id, user_id=USER)
    assert event is not None
    assert event.node_type is NodeType.NOTE
    assert event.meta == {"k": 1, "oblivio_first_person_owner_v1": True}
    extract_all(memory)
    nodes = memory.get_event_nodes(message.event_id, user_id=USER)
    assert [n.node_type for n in nodes] == [NodeType.NOTE, NodeType.FACT, NodeType.ENTITY]


@ALSO_ON_CITUS
def test_a_request_id_makes_ingest_idempotent(memory: MemoryClient) -> None:
    request = uuid.uuid4()
    first = said(memory, "I use Vim.", request_id=request)
    again = said(memory, "I use Vim.", request_id=request)
    assert again == first
    assert len(events_of_type(memory, USER, ev.CLAIMS_EXTRACTED)) == 1
    with pytest.raises(IdempotencyConflictError):
        said(memory, "I use Emacs.", request_id=request)


@ALSO_ON_CITUS
def test_a_batch_takes_per_message_declarations(memory: MemoryClient) -> None:
    results = memory.ingest_batch(
        [
            {"message": "I use Vim.", "first_person_owner": True},
            {"message": "I use Vim.", "role": "assistant"},
            {"message": "I don't use Vim anymore.", "first_person_owner": True},
        ],
        user_id=USER,
        wait_for_extraction=True,
    )
    assert lifecycle(memory, results[0]) is LifecycleState.SUPERSEDED
    assert claim_of(memory, results[1]).subject_kind == "event_local"
    assert lifecycle(memory, results[1]) is LifecycleState.ACTIVE


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"first_person_owner": "yes"}, "first_person_owner must be a boolean"),
        ({"first_person_owner": 1}, "first_person_owner must be a boolean"),
        (
            {"first_person_owner": True, "role": "assistant"},
            "first_person_owner requires the user role",
        ),
        (
            {"first_person_owner": True, "speaker": "Dana"},
            "first_person_owner cannot be combined with a named speaker",
        ),
        (
            {"meta": {"oblivio_first_person_owner_v1": True}},
            "meta must not set 'oblivio_first_person_owner_v1'; pass first_person_owner instead",
        ),
        ({"enable_speaker_references": "on"}, "enable_speaker_references must be a boolean"),
        (
            {"enable_speaker_references": True},
            "enable_speaker_references requires a named speaker",
        ),
        ({"occurred_at": "yesterday"}, "occurred_at must be an ISO 8601 date and time"),
        (
            {"occurred_at": datetime(2026, 1, 1)},
            "occurred_at must be a timezone-aware date and time",
        ),
    ],
)
def test_bad_input_writes_nothing(
    memory: MemoryClient, fields: dict[str, Any], message: str
) -> None:
    rejects(memory, lambda: memory.ingest("I use Vim.", user_id=USER, **fields), message=message)
    # In a batch, one bad message rejects the batch.
    batch = [{"message": "I use Emacs."}, {"message": "I use Vim.", **fields}]
    rejects(memory, lambda: memory.ingest_batch(batch, user_id=USER), message=message)


def test_store_rejects_the_reserved_key_too(memory: MemoryClient) -> None:
    rejects(
        memory,
        lambda: memory.store("x", user_id=USER, meta={"oblivio_first_person_owner_v1": True}),
        message="meta must not set 'oblivio_first_person_owner_v1'; pass first_person_owner "
        "instead",
    )


def test_batches_are_bounded(memory: MemoryClient) -> None:
    too_many = [{"message": f"I use tool {i}."} for i in range(101)]
    rejects(
        memory,
        lambda: memory.ingest_batch(too_many, user_id=USER),
        message="a batch holds 1 to 100 messages",
    )
    rejects(memory, lambda: memory.ingest_batch([], user_id=USER))
    rejects(memory, lambda: memory.ingest_batch([{"text": "x"}], user_id=USER))


class _NewerExtractor:
    """A later extractor version that reads every message differently."""

    name = "oblivio.rules.en"
    version = RuleClaimExtractor.version + 1

    def plan(self, message: Message) -> IngestionPlan:
        return IngestionPlan(extractor=self.name, extractor_version=self.version, rules=("none",))


@ALSO_ON_CITUS
def test_rebuilds_use_the_saved_plan_not_a_newer_extractor(
    memory: MemoryClient, memory_settings: Settings
) -> None:
    first = said(memory, "I use an insulin pump.")
    [before] = [e.data for e in events_of_type(memory, USER, ev.CLAIMS_EXTRACTED)]
    assert before is not None
    newer = MemoryClient(settings=memory_settings, claim_extractor=_NewerExtractor())
    try:
        later = newer.ingest(
            "I use Vim.", user_id=USER, first_person_owner=True, wait_for_extraction=True
        )
        assert later.claim_node_ids == ()  # the newer extractor applies to new messages
        unrelated = newer.store("unrelated", user_id=USER)
        newer.delete_event(unrelated, user_id=USER, wait=True)  # rebuilds the graph
        [claim] = first.claim_node_ids or ()
        node = newer.get_node(claim, user_id=USER)
        assert node is not None
        assert node.meta["claim_extractor_version"] == RuleClaimExtractor.version
        [again, _] = [e.data for e in events_of_type(newer, USER, ev.CLAIMS_EXTRACTED)]
        assert again == before  # rules, ids and checksum as recorded
        for name, (live, fresh) in newer.replay_comparison(user_id=USER).items():
            assert live == fresh, name
    finally:
        newer.close()


@ALSO_ON_CITUS
def test_each_message_is_its_own_append(memory: MemoryClient) -> None:
    """Messages the worker reads in one page still get one append each: every
    claims event is recorded on its own (an append records one time for all it holds)."""
    for text in ("I use Vim.", "I like tea.", "I don't use Vim anymore."):
        memory.ingest(text, user_id=USER, first_person_owner=True)
    extract_all(memory)
    recorded = [e.recorded_at for e in events_of_type(memory, USER, ev.CLAIMS_EXTRACTED)]
    assert len(recorded) == 3
    assert len(set(recorded)) == 3
