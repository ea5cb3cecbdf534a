"""Erasing ingested messages erases what was derived from them, and replay still agrees."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from oblivio import MemoryClient
from projections.model import LifecycleState
from projections.storage.tables import claims, nodes
from tests.conftest import WITH_CITUS
from tests.memory.conftest import settings_of_backend
from tests.memory.test_ingest import USER, lifecycle, replay_equal, said

# Erasing what ingest derived holds on the Citus tier too: the ``memory`` fixture takes this.
memory_settings = pytest.fixture(params=WITH_CITUS)(settings_of_backend)


def claim_rows(memory: MemoryClient) -> int:
    with memory.context.store.backend.engine.connect() as conn:
        head = memory.context.store.head(memory.context.namespace, USER)
        assert head is not None
        query = sa.select(sa.func.count()).where(claims.c.stream_id == head.stream.stream_id)
        return int(conn.execute(query).scalar_one())


def test_deleting_a_correction_brings_the_claim_back(memory: MemoryClient) -> None:
    first = said(memory, "I use an insulin pump.")
    second = said(memory, "I don't use an insulin pump anymore.")
    assert lifecycle(memory, first) is LifecycleState.SUPERSEDED
    status = memory.delete_event(second.event_id, user_id=USER, wait=True)
    # The message, its claims event and the likely-update decision about it all
    # went, in one request.
    assert status.events_erased == 3
    assert memory.get_event(second.event_id, user_id=USER) is None
    [gone] = second.claim_node_ids or ()
    assert memory.get_node(gone, user_id=USER, include_superseded=True) is None
    assert memory.get_assertion_state(gone, user_id=USER) is None
    # The retirement was derived from the erased message: it goes too.
    assert lifecycle(memory, first) is LifecycleState.ACTIVE
    state = memory.get_assertion_state((first.claim_node_ids or ())[0], user_id=USER)
    assert state is not None
    assert state.claim is not None
    assert state.claim.valid_to is None
    assert claim_rows(memory) == 1
    assert status.certificate is not None
    payload = memory.verify_certificate(status.certificate)
    assert all(p["equal"] for p in payload["projections"])
    replay_equal(memory)
    retrieved = memory.retrieve("insulin pump", user_id=USER, include_superseded=True)
    assert "anymore" not in " ".join(n.content for n in retrieved.nodes)


def test_deleting_the_retired_claims_message(memory: MemoryClient) -> None:
    first = said(memory, "I use an insulin pump.")
    second = said(memory, "I don't use an insulin pump anymore.")
    memory.delete_event(first.event_id, user_id=USER, wait=True)
    assert memory.get_assertion_state((first.claim_node_ids or ())[0], user_id=USER) is None
    assert lifecycle(memory, second) is LifecycleState.ACTIVE
    assert claim_rows(memory) == 1
    replay_equal(memory)


def test_forget_removes_claims_plans_and_identities(memory: MemoryClient) -> None:
    said(memory, "I use an insulin pump.")
    said(memory, "I don't use an insulin pump anymore.")
    head = memory.context.store.head(memory.context.namespace, USER)
    assert head is not None
    status = memory.forget(USER)
    assert status.events_erased == 5  # two messages, two claims events, one decision
    assert status.certificate is not None
    with memory.context.store.backend.engine.connect() as conn:
        for table in (claims, nodes):
            query = sa.select(sa.func.count()).where(table.c.stream_id == head.stream.stream_id)
            assert conn.execute(query).scalar_one() == 0
    assert memory.retrieve("insulin pump", user_id=USER).nodes == []


def test_a_message_erased_before_extraction_yields_no_claims(memory: MemoryClient) -> None:
    message = memory.ingest("I use Vim.", user_id=USER, first_person_owner=True)
    memory.delete_event(message.event_id, user_id=USER)
    memory.ingest("I use Emacs.", user_id=USER, first_person_owner=True, wait_for_extraction=True)
    assert claim_rows(memory) == 1
    replay_equal(memory)
