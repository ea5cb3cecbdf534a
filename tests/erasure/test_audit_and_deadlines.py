"""The audit stream records every erasure step without personal data; deadlines are
watched; failing and abandoned rebuild jobs surface in the request's status."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pytest

from eventstore import Transaction
from eventstore import jobs as job_queue
from eventstore.erasure import get_request
from eventstore.errors import OperationalError
from oblivio import MemoryClient
from oblivio.memory.compliance import verify_audit_export
from projections.base import Projection
from tests.erasure._support import (
    audit_entries,
    completed,
    marker,
    rebuild_worker,
    run_jobs,
    seed_subject,
)
from tests.erasure.conftest import Opener
from workers.erasure import Eraser
from workers.maintenance import flag_overdue, reap_leases
from workers.policy import ErasurePolicy
from workers.rebuild import RebuildWorker

ALICE, BOB = "alice-7f3a@example.org", "bob-91c2@example.org"
DPO = "dpo-officer-42"


def actions(entries: list[dict[str, Any]]) -> list[str]:
    return [e["entry"]["action"] for e in entries]


def test_audit_stream_records_erasures_without_personal_data(client: MemoryClient) -> None:
    store, namespace = client.context.store, client.context.namespace
    alice = seed_subject(client, ALICE)
    meta_secret = marker("meta")
    bob_event = client.store(f"Bob {marker('bob')}", user_id=BOB, meta={"note": meta_secret})
    deleted = client.delete_event(alice.event_ids[0], user_id=ALICE, actor_id=DPO, wait=True)
    forgotten = client.forget(ALICE, actor_id=DPO, wait=True)
    certificates = {completed(deleted)["signature"], completed(forgotten)["signature"]}
    assert len(certificates) == 2

    text = client.export_audit()
    verify_audit_export(text, client.jwks())
    entries = audit_entries(client)
    alice_ref = store.subject_ref(namespace, ALICE)
    actor_ref = store.codec.pseudonym("actor", DPO)

    [delete] = [e for e in entries if e["entry"]["action"] == "erasure.delete_event"]
    [forget] = [e for e in entries if e["entry"]["action"] == "erasure.forget"]
    certified = [e for e in entries if e["entry"]["action"] == "erasure.certified"]
    for entry, status in ((delete, deleted), (forget, forgotten)):
        assert entry["type"] == "audit." + entry["entry"]["action"]
        assert entry["entry"]["subject_ref"] == alice_ref
        assert entry["entry"]["actor_ref"] == actor_ref
        assert entry["entry"]["object_refs"] == {"request_id": str(status.request_id)}
    assert delete["entry"]["counts"] == {"events": deleted.events_erased}
    assert forget["entry"]["counts"] == {"events": forgotten.events_erased, "api_keys_revoked": 0}
    assert {
        (e["entry"]["object_refs"]["request_id"], e["entry"]["object_refs"]["certificate_id"])
        for e in certified
    } == {(str(s.request_id), str(s.certificate_id)) for s in (deleted, forgotten)}
    assert (
        forget["entry"]["digests"]["merkle_root"]
        == client.verify_certificate(completed(forgotten))["erasure"]["merkle_root"]
    )
    # Order: each request is recorded before its certificate.
    for entry, status in ((delete, deleted), (forget, forgotten)):
        [its_certificate] = [
            c
            for c in certified
            if c["entry"]["object_refs"]["request_id"] == str(status.request_id)
        ]
        assert entry["version"] < its_certificate["version"]

    # Content-free: no user id, no actor id, no content, no metadata.
    for secret in (ALICE, BOB, DPO, meta_secret, *alice.secrets, "zebra", "alice", "bob"):
        assert secret not in text, secret
    assert str(bob_event) not in text


def test_overdue_watchdog_flags_requests_past_their_deadline(open_client: Opener) -> None:
    hurried = open_client(erasure_deadline_hours=1e-6)  # a deadline of 3.6 ms
    relaxed = open_client()
    seed_subject(hurried, ALICE)
    seed_subject(relaxed, BOB)
    late = hurried.forget(ALICE, wait=False)
    on_time = relaxed.forget(BOB, wait=False)
    time.sleep(0.05)
    store, clock = hurried.context.store, hurried.context.clock

    assert flag_overdue(store, clock) == 1
    assert flag_overdue(store, clock) == 0  # idempotent: flagged once

    status = hurried.erasure_status(late.request_id)
    assert status.overdue is True
    assert status.status == "rebuilding"
    assert status.deadline_at < clock()
    assert relaxed.erasure_status(on_time.request_id).overdue is False
    with store.reading() as view:
        late_row = get_request(view.connection, late.request_id)
        on_time_row = get_request(view.connection, on_time.request_id)
    assert late_row is not None
    assert late_row.overdue_at is not None
    assert on_time_row is not None
    assert on_time_row.overdue_at is None
    [flagged] = [e for e in audit_entries(hurried) if e["entry"]["action"] == "erasure.overdue"]
    assert flagged["entry"]["object_refs"] == {"request_id": str(late.request_id)}
    assert flagged["entry"]["subject_ref"] == status.subject_ref

    # Completing late still completes; the record keeps saying it was late.
    run_jobs(hurried)
    final = hurried.erasure_status(late.request_id)
    completed(final)
    assert final.overdue is True
    assert flag_overdue(store, clock) == 0


class FailingWorker(RebuildWorker):
    def _rebuild(
        self, tx: Transaction, projection: Projection, stream_id: int | None
    ) -> dict[str, str]:
        raise RuntimeError("projection store unavailable")


def eraser_for(client: MemoryClient, policy: ErasurePolicy) -> Eraser:
    ctx = client.context
    return Eraser(ctx.store, ctx.projections, policy, ctx.clock)


def test_failing_rebuilds_retry_with_backoff_then_fail_the_request(client: MemoryClient) -> None:
    seed_subject(client, ALICE)
    policy = ErasurePolicy(max_attempts=2, backoff_base=timedelta(0))
    request_id = eraser_for(client, policy).forget(
        client.context.namespace, ALICE, legal_ground="art17-1-b"
    )
    failing = rebuild_worker(client, policy, FailingWorker)

    assert failing.run_pending() == 4  # two jobs, two attempts each

    status = client.erasure_status(request_id)
    assert status.status == "failed"
    assert status.certificate is None
    assert {(j.status, j.attempts) for j in status.jobs} == {("failed", 2)}
    assert all("projection store unavailable" in (j.last_error or "") for j in status.jobs)
    assert "erasure.failed" in actions(audit_entries(client))
    # What was erased stays erased: failing to certify never brings content back.
    assert client.get_events(user_id=ALICE) == []


def test_backoff_delays_the_next_attempt(client: MemoryClient) -> None:
    event_id = client.store("retry me", user_id=ALICE)
    policy = ErasurePolicy(max_attempts=3, backoff_base=timedelta(minutes=5))
    request_id = eraser_for(client, policy).delete_event(
        client.context.namespace, event_id, legal_ground="art17-1-b"
    )

    assert rebuild_worker(client, policy, FailingWorker).run_pending() == 2
    queued = client.erasure_status(request_id).jobs
    assert {(j.status, j.attempts) for j in queued} == {("queued", 1)}
    assert run_jobs(client) == 0, "a job ran before its backoff elapsed"


class UnreachableDatabaseWorker(RebuildWorker):
    def _rebuild(
        self, tx: Transaction, projection: Projection, stream_id: int | None
    ) -> dict[str, str]:
        raise OperationalError("the connection to the database was lost")


def test_attempts_the_database_could_not_complete_never_fail_the_request(
    client: MemoryClient,
) -> None:
    # An outage longer than the backoff (a failover, a node restarting) must not end
    # an erasure uncertified for good: only the job's own failures count.
    seed_subject(client, ALICE)
    policy = ErasurePolicy(max_attempts=2, backoff_base=timedelta(minutes=1))
    request_id = eraser_for(client, policy).forget(
        client.context.namespace, ALICE, legal_ground="art17-1-b"
    )
    ctx, waited = client.context, [timedelta(0)]

    def clock() -> datetime:
        return ctx.clock() + waited[0]

    unreachable = UnreachableDatabaseWorker(
        ctx.store, ctx.projections, ctx.certifier, policy, clock
    )
    for _ in range(2 * policy.max_attempts):
        assert unreachable.run_pending() == 2  # both jobs, each once its backoff passed
        waited[0] += timedelta(minutes=5)
    status = client.erasure_status(request_id)
    assert status.status == "rebuilding"
    assert {(j.status, j.attempts) for j in status.jobs} == {("queued", 0)}
    assert all("connection to the database was lost" in (j.last_error or "") for j in status.jobs)
    # The database answers again: the erasure completes, with its one certificate.
    worker = RebuildWorker(ctx.store, ctx.projections, ctx.certifier, policy, clock)
    assert worker.run_pending() == 2
    completed(client.erasure_status(request_id))


def test_lease_reaper_fails_jobs_abandoned_on_their_last_attempt(client: MemoryClient) -> None:
    seed_subject(client, ALICE)
    policy = ErasurePolicy(max_attempts=1)
    request_id = eraser_for(client, policy).forget(
        client.context.namespace, ALICE, legal_ground="art17-1-b"
    )
    store, clock = client.context.store, client.context.clock
    with store.transaction() as tx:  # a worker claims a job, then dies
        claimed = job_queue.claim(tx.connection, "dead-worker", clock(), timedelta(0))
    assert claimed is not None
    assert reap_leases(store, lambda: clock() + timedelta(seconds=1)) == 1

    status = client.erasure_status(request_id)
    assert status.status == "failed"
    [failed] = [j for j in status.jobs if j.status == "failed"]
    assert failed.projection == claimed.projection
    assert "lease expired" in (failed.last_error or "")
    assert "erasure.failed" in actions(audit_entries(client))
    assert reap_leases(store, lambda: clock() + timedelta(seconds=1)) == 0


@pytest.mark.parametrize("request_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_status_of_unknown_or_malformed_request_is_a_typed_error(
    client: MemoryClient, request_id: str
) -> None:
    with pytest.raises(LookupError if request_id[0] == "0" else ValueError):
        client.erasure_status(request_id)


def test_an_audit_slice_verifies_and_chains_from_the_entry_before_it(
    client: MemoryClient,
) -> None:
    first = client.store("first", user_id=ALICE)
    completed(client.delete_event(first, wait=True))
    time.sleep(0.01)
    since = client.context.clock()
    completed(client.forget(ALICE, wait=True))

    whole = verify_audit_export(client.export_audit(), client.jwks())
    text = client.export_audit(since=since)
    part = verify_audit_export(text, client.jwks())

    assert 0 < part["count"] < whole["count"]
    assert part["previous_chain_hash"] != "00" * 32
    assert part["chain_head"] == whole["chain_head"]
    sliced = text.splitlines()[:-1]
    assert all('"erasure.delete_event"' not in line for line in sliced)
    assert any('"erasure.forget"' in line for line in sliced)
