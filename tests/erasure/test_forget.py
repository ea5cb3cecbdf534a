"""forget end to end: the certificate says everything DESIGN §6 lists, and says it truly;
nothing of the subject is readable afterwards; other subjects are untouched; forgetting
again answers with the same request; later writes start a new generation with a new key."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path

import pytest

from appdata import apikeys
from certificates import merkle_root
from eventstore import Erasure
from oblivio import MemoryClient
from oblivio.memory import api_keys
from oblivio.settings import Settings
from tests.conftest import WITH_CITUS
from tests.erasure._support import (
    Seeded,
    assert_same_request,
    audit_entries,
    certificate_rows,
    completed,
    data_key_rows,
    marker,
    projection_rows,
    run_jobs,
    seed_subject,
    stream_id_of,
    whole_log,
)
from tests.erasure.conftest import settings_of_backend

# Erasure holds on the Citus tier too: the ``client`` fixture takes this.
store_settings = pytest.fixture(params=WITH_CITUS)(settings_of_backend)

ALICE, BOB = "alice@example.org", "bob@example.org"
DPO = "dpo-officer-7"


def parse_time(text: str) -> datetime:
    assert text.endswith("Z"), text
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert moment.utcoffset() is not None
    return moment


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def assert_nothing_readable(client: MemoryClient, subject: Seeded) -> None:
    """Every read path of the facade comes back empty for the subject."""
    user = subject.user_id
    for event_id in subject.event_ids:
        assert client.get_event(event_id) is None
        assert client.get_event(event_id, user_id=user) is None
        assert client.get_event_nodes(event_id) == []
        assert client.get_event_nodes(event_id, user_id=user) == []
    for node_id in subject.node_ids:
        assert client.get_node(node_id, include_superseded=True) is None
        assert client.get_node(node_id, user_id=user, include_superseded=True) is None
        assert client.get_assertion_state(node_id) is None
    assert client.get_events(user_id=user) == []
    for text in subject.secrets:
        assert client.retrieve(text, user_id=user, include_superseded=True).results == []
    exported = client.export_subject(user_id=user)
    assert (exported["events"], exported["nodes"]) == ([], [])
    assert client.negative_attractor_count(user_id=user) == 0


def test_forget_end_to_end(client: MemoryClient) -> None:
    store, namespace = client.context.store, client.context.namespace
    alice, bob = seed_subject(client, ALICE), seed_subject(client, BOB)
    alice_stream = stream_id_of(client, ALICE)
    [dek] = data_key_rows(client, alice_stream)
    written = store.read_stream(namespace, ALICE)
    bob_digests = client.replay_comparison(user_id=BOB)
    assert all(live == fresh for live, fresh in bob_digests.values())

    status = client.forget(ALICE, actor_id=DPO, legal_ground="art17-1-a", wait=True)

    certificate = completed(status)
    payload = client.verify_certificate(certificate)
    assert payload == client.verify_certificate(json.dumps(certificate))
    protected = client.context.issuer.active.kid

    # -- identity of the certificate and its issuer
    assert payload["certificate_id"] == str(status.certificate_id)
    issued_at = parse_time(payload["issued_at"])
    assert payload["issuer"] == {"name": "oblivio", "kid": protected}
    assert protected in {key["kid"] for key in client.jwks()["keys"]}

    # -- the request
    request = payload["request"]
    assert request["request_id"] == str(status.request_id)
    assert request["kind"] == "forget"
    assert request["received_at"] == iso(status.received_at)
    assert parse_time(request["received_at"]) <= parse_time(request["erased_at"]) <= issued_at
    assert request["legal_ground"] == "art17-1-a"
    assert request["legal_ground_text"]
    assert request["reason"] == "user_request"
    assert request["requested_by"] == store.codec.pseudonym("actor", DPO)
    assert DPO not in json.dumps(payload)

    # -- the subject, pseudonymous
    assert payload["subject"] == {
        "reference": store.subject_ref(namespace, ALICE),
        "namespace": namespace,
    }
    assert payload["subject"]["reference"] == status.subject_ref
    assert ALICE not in json.dumps(payload)
    for secret in alice.secrets:
        assert secret not in json.dumps(payload)

    # -- what was erased: every event, and a Merkle root over the tombstones' digests
    after = store.read_stream(namespace, ALICE)
    tombstones = [e for e in after if e.erasure_request_id == status.request_id]
    assert [e.event_id for e in tombstones] == [e.event_id for e in written]
    assert [e.digest for e in tombstones] == [e.digest for e in written]  # digests survive
    erasure = payload["erasure"]
    assert erasure["events_erased"] == len(written) == status.events_erased
    assert erasure["stream_version_range"] == [1, len(written)]
    assert erasure["merkle_root"] == merkle_root([e.digest for e in tombstones]).hex()

    # -- key destruction: the data key that existed before, and it is gone
    destruction = payload["key_destruction"]
    assert destruction["dek_id"] == str(dek.dek_id)
    assert parse_time(destruction["destroyed_at"]) <= issued_at
    assert data_key_rows(client, alice_stream) == []

    # -- projections: rebuilt, and replay equals incremental
    results = {p["name"]: p for p in payload["projections"]}
    assert set(results) == {"node_graph", "vector_state"}
    for result in results.values():
        assert result["equal"] is True
        assert result["state_digest"] == result["replay_digest"] != ""
        assert isinstance(result["version"], int)
        assert isinstance(result["position"], str)

    # -- the log after erasure, residual copies and limits
    head = store.head(namespace, ALICE)
    assert head is not None
    assert head.closed_at is not None
    assert payload["log"] == {"chain_head": head.chain_hash.hex(), "stream_version": len(written)}
    assert store.verify(namespace, ALICE).ok
    residual = payload["residual_copies"]
    assert residual["kek_version"] == store.codec.keys.active_kek_version == 1
    assert parse_time(residual["unrecoverable_after"]) > issued_at
    assert "version 1" in residual["statement"]
    assert payload["limits"]

    # -- nothing of Alice is readable anywhere
    assert_nothing_readable(client, alice)
    assert projection_rows(client, alice_stream) == {}
    alice_in_log = [e for e in whole_log(client) if e.stream.stream_id == alice_stream]
    assert [e.event_id for e in alice_in_log] == [e.event_id for e in written]
    assert all(e.data is None and e.metadata is None and e.erased for e in alice_in_log)
    assert {e.erasure for e in alice_in_log} == {Erasure.TOMBSTONED}

    # -- Bob is untouched
    assert client.replay_comparison(user_id=BOB) == bob_digests
    for event_id, text in zip(bob.event_ids, bob.secrets, strict=False):
        event = client.get_event(event_id, user_id=BOB)
        assert event is not None
        assert event.content == text
    assert client.retrieve(bob.secrets[1], user_id=BOB).results
    assert store.verify().ok


def test_forget_without_wait_hides_everything_before_the_jobs_run(
    client: MemoryClient,
) -> None:
    alice = seed_subject(client, ALICE)

    status = client.forget(ALICE, wait=False)

    assert status.status == "rebuilding"
    assert status.certificate is None
    assert {j.status for j in status.jobs} == {"queued"}
    assert_nothing_readable(client, alice)
    assert run_jobs(client) == 2
    completed(client.erasure_status(status.request_id))


def test_forgetting_again_answers_with_the_same_request_and_certificate(
    client: MemoryClient,
) -> None:
    seed_subject(client, ALICE)
    first = client.forget(ALICE, wait=True)

    again = client.forget(ALICE, wait=True)
    without_waiting = client.forget(ALICE, wait=False, reason="operator_request")
    assert_same_request(client, first, [again, without_waiting])


def test_writes_after_forget_start_a_new_generation_with_a_new_key(
    client: MemoryClient,
) -> None:
    store, namespace = client.context.store, client.context.namespace
    seed_subject(client, ALICE)
    old_stream = stream_id_of(client, ALICE)
    [old_key] = data_key_rows(client, old_stream)
    first = client.forget(ALICE, wait=True)
    old_certificate = completed(first)

    text = f"Hello again, {marker('newgen')}"
    event_id = client.store(text, user_id=ALICE)

    head = store.head(namespace, ALICE)
    assert head is not None
    assert head.stream.generation == 2
    assert head.closed_at is None
    assert head.stream.stream_id != old_stream
    [new_key] = data_key_rows(client, head.stream.stream_id)
    assert new_key.dek_id != old_key.dek_id
    event = client.get_event(event_id, user_id=ALICE)
    assert event is not None
    assert event.content == text
    assert [e.id for e in client.get_events(user_id=ALICE)] == [event_id]
    assert client.verify_certificate(old_certificate)["request"]["request_id"] == str(
        first.request_id
    )

    second = client.forget(ALICE, wait=True)

    new_certificate = completed(second)
    assert second.request_id != first.request_id
    assert second.certificate_id != first.certificate_id
    payload = client.verify_certificate(new_certificate)
    assert payload["erasure"]["events_erased"] == 1
    assert payload["erasure"]["stream_version_range"] == [1, 1]
    assert payload["key_destruction"]["dek_id"] == str(new_key.dek_id)
    assert payload["subject"]["reference"] == store.subject_ref(namespace, ALICE)
    assert client.get_event(event_id) is None
    assert data_key_rows(client, head.stream.stream_id) == []
    assert client.verify_certificate(old_certificate)["certificate_id"] == str(first.certificate_id)
    assert len(certificate_rows(client, first.request_id)) == 1
    assert len(certificate_rows(client, second.request_id)) == 1
    # A third forget is answered by the latest request.
    assert client.forget(ALICE).request_id == second.request_id


def test_forgetting_a_subject_that_never_wrote_is_certified_with_nothing_erased(
    client: MemoryClient,
) -> None:
    status = client.forget("nobody@example.org", wait=True)

    payload = client.verify_certificate(completed(status))
    assert payload["erasure"]["data_held"] is False
    assert payload["erasure"]["statement"].startswith("No data was held for this subject")
    assert payload["erasure"]["events_erased"] == 0
    assert payload["erasure"]["stream_version_range"] is None
    assert payload["erasure"]["merkle_root"] == merkle_root([]).hex()
    assert payload["key_destruction"] is None
    assert payload["api_keys"]["revoked"] == 0
    assert client.forget("nobody@example.org").request_id == status.request_id


def test_a_certificate_says_when_data_was_held(client: MemoryClient) -> None:
    subject = seed_subject(client, ALICE)
    one_event = client.delete_event(subject.event_ids[0], wait=True)
    assert client.verify_certificate(completed(one_event))["erasure"]["data_held"] is True

    erasure = client.verify_certificate(completed(client.forget(ALICE, wait=True)))["erasure"]
    assert erasure["data_held"] is True
    erased = erasure["events_erased"]
    assert erasure["statement"] == f"{erased} event(s) of the subject were erased."


def test_forget_revokes_the_subjects_api_keys_and_says_how_many(client: MemoryClient) -> None:
    ctx = client.context
    seed_subject(client, ALICE)
    alice_keys = [api_keys.create_api_key(ctx, "user", user_id=ALICE) for _ in range(2)]
    others = [
        api_keys.create_api_key(ctx, "user", user_id=BOB),
        api_keys.create_api_key(ctx, "operator"),
        # The same user id in another namespace is another subject.
        api_keys.create_api_key(
            dataclasses.replace(ctx, namespace="elsewhere"), "user", user_id=ALICE
        ),
    ]
    revoked_before = api_keys.create_api_key(ctx, "user", user_id=ALICE)
    api_keys.revoke_api_key(ctx, revoked_before.key.key_id)

    status = client.forget(ALICE, wait=True)

    payload = client.verify_certificate(completed(status))
    assert payload["api_keys"]["revoked"] == 2
    assert "revoked" in payload["api_keys"]["statement"]
    now = ctx.clock()
    for issued in alice_keys:
        assert apikeys.authenticate_token(ctx.store, issued.token, now) is None
    for issued in others:
        assert apikeys.authenticate_token(ctx.store, issued.token, now) is not None
    [entry] = [
        line["entry"]
        for line in audit_entries(client)
        if line["entry"]["action"] == "erasure.forget"
    ]
    assert entry["counts"] == {"events": status.events_erased, "api_keys_revoked": 2}

    # Deleting one event leaves the keys alone, and its certificate says nothing of them.
    bob = seed_subject(client, BOB)
    deleted = client.verify_certificate(completed(client.delete_event(bob.event_ids[0], wait=True)))
    assert deleted["api_keys"] is None
    assert apikeys.authenticate_token(ctx.store, others[0].token, now) is not None


def test_certificate_has_no_fields_beyond_the_documented_ones(client: MemoryClient) -> None:
    seed_subject(client, ALICE)
    payload = client.verify_certificate(completed(client.forget(ALICE, wait=True)))

    assert set(payload) == {
        "format",
        "certificate_id",
        "issued_at",
        "issuer",
        "request",
        "subject",
        "erasure",
        "key_destruction",
        "api_keys",
        "projections",
        "log",
        "residual_copies",
        "limits",
    }


@pytest.mark.postgres
def test_issuer_keys_need_no_existing_data_directory(tmp_path: Path, postgres_url: str) -> None:
    """PostgreSQL with the KEK keyring elsewhere (or keys from the environment): the data
    directory, where the certificate issuer keys live by default, may not exist yet."""
    settings = Settings(
        data_dir=tmp_path / "not-yet-created",
        database_url=postgres_url,
        keyring_path=tmp_path / "keyring.json",
    )
    with MemoryClient(settings=settings) as client:
        client.store("hello", user_id=ALICE)
        client.verify_certificate(completed(client.forget(ALICE, wait=True)))
