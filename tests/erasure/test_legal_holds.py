"""Legal holds (GDPR Art. 17(3)) on both backends: a held person's erasures are
refused, recorded with their ground and re-runnable; retention sweeps skip them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from eventstore.errors import ConflictError, LegalHoldError
from oblivio import MemoryClient
from oblivio.memory import oversight
from oblivio.memory.oversight import AuditFilters
from projections.model import Scope
from tests.conftest import WITH_CITUS
from tests.erasure.conftest import settings_of_backend
from workers.maintenance import RetentionPolicy, sweep_retention

# Legal holds hold on the Citus tier too: the ``client`` fixture takes this.
store_settings = pytest.fixture(params=WITH_CITUS)(settings_of_backend)

ALICE, BOB = "alice@example.org", "bob@example.org"


def test_a_held_persons_delete_is_refused_recorded_and_runs_after_the_lift(
    client: MemoryClient,
) -> None:
    event_id = client.store("Alice keeps the invoices", user_id=ALICE)
    client.place_legal_hold(ALICE, ground="art17-3-b", reference="LAW-1")
    with pytest.raises(LegalHoldError) as refused:
        client.delete_event(event_id, user_id=ALICE)
    assert refused.value.ground == "art17-3-b"
    assert client.get_event(event_id, user_id=ALICE) is not None  # nothing erased
    entries = client.request_register(status="refused").entries
    assert [(e.kind, e.outcome) for e in entries] == [("erasure", "refused:art17-3-b")]
    audit = oversight.audit_trail(client.context, filters=AuditFilters(action="erasure.refused"))
    assert audit.entries[0]["entry"]["object_refs"]["hold_ground"] == "art17-3-b"

    with pytest.raises(ConflictError, match="already under a legal hold"):
        client.place_legal_hold(ALICE, ground="art17-3-e", reference="LAW-2")
    client.lift_legal_hold(ALICE, reference="LAW-1")
    with pytest.raises(LookupError):
        client.lift_legal_hold(ALICE, reference="LAW-1")
    assert client.delete_event(event_id, user_id=ALICE, wait=True).status == "completed"


def test_retention_sweeps_skip_held_people_and_say_so(client: MemoryClient) -> None:
    ctx = client.context
    for user in (ALICE, BOB):
        client.store(f"{user} session note", user_id=user, scope=Scope.SESSION)
    client.place_legal_hold(ALICE, ground="art17-3-e", reference="CASE-3")
    later = ctx.clock() + timedelta(days=31)
    policy = RetentionPolicy(ctx.namespace, Scope.SESSION, timedelta(days=30))

    assert sweep_retention(ctx.store, ctx.eraser, [policy], lambda: later) == 1  # Bob's
    assert len(client.export_subject(user_id=ALICE)["events"]) == 1
    skipped = oversight.audit_trail(ctx, filters=AuditFilters(action="retention.held_skipped"))
    assert skipped.total == 1
    assert skipped.entries[0]["entry"]["counts"] == {"subjects": 1}
    assert client.request_register().total == 0  # a sweep is no one's request
