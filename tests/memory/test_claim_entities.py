"""ENTITY nodes: the identities claims bind beyond their message (owner, named speakers).

Both backends, through the public facade.  An entity is derived from the
saved plans, has its identity's id (the claims' ``subject_id``), is one node
per owner and scope (or speaker name and scope) however many messages name
it, goes when every message naming it is erased, and replays to the same state.
"""

from __future__ import annotations

from oblivio import MemoryClient
from projections.model import Node, NodeType
from tests.memory.test_ingest import USER, claim_of, replay_equal, said

NAMED = {"first_person_owner": False, "speaker": "Dana", "enable_speaker_references": True}


def entity(memory: MemoryClient, node_id: object) -> Node | None:
    node = memory.get_node(str(node_id), user_id=USER)
    assert node is None or node.node_type is NodeType.ENTITY
    return node


def entities(memory: MemoryClient) -> list[Node]:
    page = memory.list_nodes(user_id=USER, node_types={NodeType.ENTITY})
    return list(page.nodes)


def test_the_owner_identity_is_one_entity_per_owner_and_scope(memory: MemoryClient) -> None:
    vim = said(memory, "I use Vim.")
    said(memory, "I like tea and I have a dog.")
    subject = claim_of(memory, vim).subject_id
    owner = entity(memory, subject)
    assert owner is not None
    assert owner.content == USER
    assert owner.meta == {"entity_kind": "owner", "entity_name": USER}
    assert owner.event_id == vim.event_id  # carried by the first message naming it
    assert [n.id for n in entities(memory)] == [subject]
    work = said(memory, "I use Jira.", scope="project")
    assert claim_of(memory, work).subject_id != subject
    assert len(entities(memory)) == 2
    replay_equal(memory)


def test_named_speakers_are_entities_and_event_local_subjects_are_not(
    memory: MemoryClient,
) -> None:
    dana = said(memory, "I use Vim.", **NAMED)
    local = said(memory, "I use Emacs.", first_person_owner=False)
    plural = said(memory, "We own a boat.")
    [speaker] = entities(memory)
    assert speaker.id == claim_of(memory, dana).subject_id
    assert speaker.content == "Dana"
    assert speaker.meta["entity_kind"] == "speaker"
    assert entity(memory, claim_of(memory, local).subject_id) is None
    assert entity(memory, claim_of(memory, plural).subject_id) is None
    # A later declaration creates the owner's entity; nothing earlier is merged into it.
    declared = said(memory, "I use Emacs.")
    assert claim_of(memory, declared).subject_id not in {
        claim_of(memory, local).subject_id,
        speaker.id,
    }
    assert len(entities(memory)) == 2


def test_excluding_entities_from_retrieval_matters(memory: MemoryClient) -> None:
    said(memory, "I use an insulin pump.")
    [owner] = entities(memory)
    memory.store("Sam's appointment is on Monday.", user_id=USER)
    shown = memory.retrieve(USER, user_id=USER, exclude_node_types={NodeType.NOTE}, limit=10)
    assert owner.id in {n.id for n in shown.nodes}
    hidden = memory.retrieve(
        USER, user_id=USER, exclude_node_types={NodeType.NOTE, NodeType.ENTITY}, limit=10
    )
    assert owner.id not in {n.id for n in hidden.nodes}
    assert hidden.nodes  # the claim and the stored fact are still there


def test_an_entity_outlives_its_first_message_and_goes_with_the_last(
    memory: MemoryClient,
) -> None:
    first = said(memory, "I use Vim.")
    second = said(memory, "I like tea.")
    subject = claim_of(memory, first).subject_id
    memory.delete_event(first.event_id, user_id=USER, wait=True)
    moved = entity(memory, subject)
    assert moved is not None
    assert moved.event_id == second.event_id  # the same identity, now carried by the next
    replay_equal(memory)
    status = memory.delete_event(second.event_id, user_id=USER, wait=True)
    assert entity(memory, subject) is None
    assert entities(memory) == []
    assert status.certificate is not None
    replay_equal(memory)


def test_an_entity_keeps_its_vector_when_the_message_it_came_from_last_is_erased(
    memory: MemoryClient,
) -> None:
    # Both messages name the owner; the vector state last embedded the entity
    # with the second.  Right after that message is erased, before any rebuild
    # job runs, the entity (still named by the first) keeps its vector.
    kept, erased = (said(memory, text) for text in ("I use Vim.", "I like tea."))
    subject = claim_of(memory, kept).subject_id
    replay_equal(memory)
    memory.delete_event(erased.event_id, user_id=USER)
    replay_equal(memory)
    found = memory.retrieve(USER, user_id=USER, node_types={NodeType.ENTITY})
    assert [n.id for n in found.nodes] == [subject]
