"""delete_event: typed errors with nothing erased; content and node gone at once; a
certificate without key destruction once the jobs ran; repeated deletes answer alike."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from eventstore import EventUnavailableError, InvalidInputError, MalformedIdError
from oblivio import MemoryClient
from tests.conftest import WITH_CITUS
from tests.erasure._support import (
    assert_same_request,
    audit_entries,
    completed,
    log_state,
    marker,
    projection_rows,
    run_jobs,
    seed_subject,
    stream_id_of,
)
from tests.erasure.conftest import settings_of_backend

# Erasure holds on the Citus tier too: the ``client`` fixture takes this.
store_settings = pytest.fixture(params=WITH_CITUS)(settings_of_backend)

ALICE, BOB = "alice@example.org", "bob@example.org"


def refused(client: MemoryClient, call: Callable[[], Any], error: type[Exception]) -> Exception:
    """``call`` raises ``error`` and leaves the log, keys, requests and jobs unchanged."""
    before = log_state(client)
    with pytest.raises(error) as caught:
        call()
    assert log_state(client) == before, "the refused request changed stored state"
    return caught.value


def test_delete_event_refuses_unknown_foreign_and_malformed_ids(client: MemoryClient) -> None:
    alice = seed_subject(client, ALICE)
    bob_event = client.store(f"Bob's note {marker('bob')}", user_id=BOB)
    target = alice.event_ids[1]

    unknown = refused(client, lambda: client.delete_event(uuid.uuid4()), EventUnavailableError)
    foreign = refused(
        client, lambda: client.delete_event(bob_event, user_id=ALICE), EventUnavailableError
    )
    # A foreign id reads exactly like an unknown one: existence is never revealed.
    assert str(foreign) == str(unknown)
    malformed: list[Any] = ["not-a-uuid", "", "1234", 42, None]
    for bad_id in malformed:
        refused(client, functools.partial(client.delete_event, bad_id), MalformedIdError)
    refused(
        client,
        lambda: client.delete_event(target, legal_ground="because-i-say-so"),
        InvalidInputError,
    )
    refused(client, lambda: client.delete_event(target, reason="whim"), InvalidInputError)
    nothing: Any = None
    refused(client, lambda: client.delete_event(target, reason=nothing), InvalidInputError)

    assert client.get_event(target, user_id=ALICE) is not None
    assert client.get_event(bob_event, user_id=BOB) is not None


def test_forget_refuses_unsupported_legal_ground_and_reason(client: MemoryClient) -> None:
    seed_subject(client, ALICE)

    refused(client, lambda: client.forget(ALICE, legal_ground="gdpr"), InvalidInputError)
    refused(client, lambda: client.forget(ALICE, reason="bored"), InvalidInputError)
    for bad_user in ("", " ", "x" * 10_000):
        refused(client, functools.partial(client.forget, bad_user), InvalidInputError)


def test_delete_event_hides_content_and_node_before_any_job_runs(client: MemoryClient) -> None:
    alice = seed_subject(client, ALICE)
    old_event, new_event = alice.event_ids
    old_node, new_node = alice.node_ids
    store, namespace = client.context.store, client.context.namespace
    version_before = store.head(namespace, ALICE)
    vectors_before = projection_rows(client, stream_id_of(client, ALICE))["memory_vectors"]

    status = client.delete_event(new_event, user_id=ALICE, wait=False)

    assert status.status == "rebuilding"
    assert status.certificate is None
    assert status.kind == "delete_event"
    assert status.events_erased == 1
    assert {j.status for j in status.jobs} == {"queued"}
    # At once, before any rebuild job ran:
    assert client.get_event(new_event) is None
    assert client.get_event(new_event, user_id=ALICE) is None
    assert client.get_event_nodes(new_event) == []
    assert client.get_node(new_node, include_superseded=True) is None
    assert new_event not in [e.id for e in client.get_events(user_id=ALICE)]
    texts = [n.node.content for n in client.retrieve(alice.secrets[1], user_id=ALICE).results]
    assert alice.secrets[1] not in texts
    exported = client.export_subject(user_id=ALICE)
    assert str(new_event) not in {e["event_id"] for e in exported["events"]}
    assert alice.secrets[1] not in str(exported)
    rows = projection_rows(client, stream_id_of(client, ALICE))
    assert rows["memory_vectors"] == vectors_before - 1
    [erased] = [e for e in store.read_stream(namespace, ALICE) if e.event_id == new_event]
    assert erased.data is None
    assert erased.erasure_request_id == status.request_id
    # The rest of the subject is still there, and the stream stays open.
    kept = client.get_event(old_event, user_id=ALICE)
    assert kept is not None
    assert kept.content == alice.secrets[0]
    head = store.head(namespace, ALICE)
    assert head is not None
    assert version_before is not None
    assert head.closed_at is None
    assert head.stream == version_before.stream
    assert store.verify(namespace, ALICE).ok
    assert client.get_node(old_node, include_superseded=True) is not None

    assert run_jobs(client) == 2

    payload = client.verify_certificate(completed(client.erasure_status(status.request_id)))
    assert payload["key_destruction"] is None
    assert payload["request"]["kind"] == "delete_event"
    assert payload["erasure"]["events_erased"] == 1
    assert payload["erasure"]["stream_version_range"] == [erased.version, erased.version]
    assert payload["residual_copies"]["kek_version"] is None
    assert all(p["equal"] for p in payload["projections"])
    assert client.replay_comparison(user_id=ALICE) == {
        name: (p["state_digest"], p["replay_digest"])
        for name, p in ((p["name"], p) for p in payload["projections"])
    }
    assert client.get_event(new_event) is None
    assert client.get_node(new_node, include_superseded=True) is None


def test_deleting_an_already_deleted_event_returns_the_same_request(
    client: MemoryClient,
) -> None:
    event_id = client.store(f"Delete me {marker('once')}", user_id=ALICE)
    first = client.delete_event(event_id, user_id=ALICE, wait=True)

    again = client.delete_event(event_id, user_id=ALICE, wait=True)
    by_operator = client.delete_event(str(event_id), reason="correction", wait=False)
    assert_same_request(client, first, [again, by_operator])


def test_deleting_an_event_of_a_forgotten_subject_answers_with_the_forget_request(
    client: MemoryClient,
) -> None:
    alice = seed_subject(client, ALICE)
    forgotten = client.forget(ALICE, wait=True)

    answer = client.delete_event(alice.event_ids[0], wait=False)

    assert answer.request_id == forgotten.request_id
    assert answer.certificate == forgotten.certificate


def test_audit_entries_cannot_be_erased_through_delete_event(client: MemoryClient) -> None:
    event_id = client.store(f"note {marker('audit')}", user_id=ALICE)
    completed(client.delete_event(event_id, wait=True))
    audit_ids = [line["event_id"] for line in audit_entries(client)]
    assert audit_ids

    for audit_id in audit_ids:
        refused(client, functools.partial(client.delete_event, audit_id), EventUnavailableError)
        refused(
            client,
            functools.partial(client.delete_event, audit_id, user_id=ALICE),
            EventUnavailableError,
        )
    assert [line["event_id"] for line in audit_entries(client)] == audit_ids
