"""KEK rotation (re-wrap, retire, residual copies) and retention sweeps."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import sqlalchemy as sa

from eventstore import KeyringFile, KeyUnavailableError
from eventstore.codec import WrappedKey
from eventstore.schema import data_keys
from oblivio import MemoryClient, Scope
from tests.conftest import WITH_CITUS
from tests.erasure._support import (
    completed,
    data_key_rows,
    marker,
    raw_rows,
    run_jobs,
    seed_subject,
    stream_id_of,
)
from tests.erasure.conftest import Opener, settings_of_backend
from workers.keys import rotate_keks
from workers.maintenance import RetentionPolicy, sweep_retention
from workers.policy import RETENTION_LEGAL_GROUND, KeyPolicy

# Rotation and retention hold on the Citus tier too: the ``client`` fixture takes this.
store_settings = pytest.fixture(params=WITH_CITUS)(settings_of_backend)

ALICE, BOB, CAROL = "alice@example.org", "bob@example.org", "carol@example.org"
AT_ONCE = KeyPolicy(rotate_every=timedelta(0), retire_after=timedelta(0))


def keyring_of(client: MemoryClient) -> KeyringFile:
    keys = client.context.store.codec.keys
    assert isinstance(keys, KeyringFile)
    return keys


def kek_versions(client: MemoryClient) -> list[int]:
    """The KEK version of every live data key (subjects' and the audit stream's)."""
    return [row.kek_version for row in raw_rows(client, sa.select(data_keys))]


def test_rotation_rewraps_every_key_retires_the_old_kek_and_keeps_data_readable(
    client: MemoryClient, open_client: Opener
) -> None:
    keyring, store = keyring_of(client), client.context.store
    alice, bob = seed_subject(client, ALICE), seed_subject(client, BOB)
    seed_subject(client, CAROL)
    before = completed(client.forget(CAROL, wait=True))
    assert client.verify_certificate(before)["residual_copies"]["kek_version"] == 1
    [backup] = data_key_rows(client, stream_id_of(client, ALICE))  # a copy in a "backup"
    live_keys = len(kek_versions(client))
    assert kek_versions(client) == [1] * live_keys  # Alice, Bob and the audit stream

    report = rotate_keks(store, keyring, AT_ONCE, client.context.clock)

    assert (report.rotated_to, report.rewrapped, report.retired) == (2, live_keys, [1])
    assert keyring.active_kek_version == 2
    assert kek_versions(client) == [2] * live_keys
    [old, new] = keyring.kek_records()
    assert (old.version, old.key, old.retired_at is not None) == (1, None, True)
    assert new.key is not None
    assert new.retired_at is None
    on_disk = KeyringFile(keyring.path)
    with pytest.raises(KeyUnavailableError):
        on_disk.kek(1)
    # The residual copy of a data key wrapped under the retired KEK is useless now.
    with pytest.raises(KeyUnavailableError):
        store.codec.unwrap(WrappedKey(backup.dek_id, backup.kek_version, backup.wrapped_key))

    # Every live memory reads as before, in this client and in a fresh one.
    for reader in (client, open_client()):
        for subject in (alice, bob):
            event = reader.get_event(subject.event_ids[1], user_id=subject.user_id)
            assert event is not None
            assert event.content == subject.secrets[1]
            assert reader.retrieve(subject.secrets[1], user_id=subject.user_id).results
    new_event = client.store(f"after rotation {marker('rot')}", user_id="dave@example.org")
    assert client.get_event(new_event) is not None
    assert kek_versions(client) == [2] * (live_keys + 1)

    after = completed(client.forget(ALICE, wait=True))
    residual = client.verify_certificate(after)["residual_copies"]
    assert residual["kek_version"] == 2
    assert "version 2" in residual["statement"]
    assert residual["unrecoverable_after"] is not None
    assert client.verify_certificate(before)["residual_copies"]["kek_version"] == 1

    quiet = rotate_keks(store, keyring, KeyPolicy(), client.context.clock)
    assert (quiet.rotated_to, quiet.rewrapped, quiet.retired) == (None, 0, [])


def test_certificate_names_the_actual_retirement_date_of_a_retired_kek(
    client: MemoryClient,
) -> None:
    keyring = keyring_of(client)
    seed_subject(client, ALICE)
    status = client.forget(ALICE, wait=False)  # Alice's key, wrapped under KEK 1, is gone

    report = rotate_keks(client.context.store, keyring, AT_ONCE, client.context.clock)

    assert report.retired == [1]
    [retired] = [r for r in keyring.kek_records() if r.version == 1]
    assert retired.retired_at is not None
    run_jobs(client)
    residual = client.verify_certificate(completed(client.erasure_status(status.request_id)))[
        "residual_copies"
    ]
    assert residual["kek_version"] == 1
    assert residual["unrecoverable_after"] == retired.retired_at.isoformat().replace("+00:00", "Z")


def test_rotation_by_another_process_does_not_break_a_running_client(
    open_client: Opener,
) -> None:
    """Two processes share the keyring file (API and worker); one of them rotates."""
    running, rotating = open_client(), open_client()
    alice = seed_subject(running, ALICE)

    report = rotate_keks(
        rotating.context.store, keyring_of(rotating), AT_ONCE, rotating.context.clock
    )

    assert report.retired == [1]
    event = running.get_event(alice.event_ids[1], user_id=ALICE)
    assert event is not None
    assert event.content == alice.secrets[1]
    bob_event = running.store(f"new subject {marker('stale')}", user_id=BOB)
    assert set(kek_versions(running)) == {2}, "a new data key was wrapped under an old KEK"
    later = open_client()  # e.g. after a restart
    read = later.get_event(bob_event, user_id=BOB)
    assert read is not None


# -- retention ------------------------------------------------------------------------------


def test_retention_erases_only_expired_session_memories(client: MemoryClient) -> None:
    store, namespace, clock = client.context.store, client.context.namespace, client.context.clock
    old_session = [
        client.store(
            f"session {marker('old')}", user_id=user, scope=Scope.SESSION, session_id="s-1"
        )
        for user in (ALICE, BOB)
    ]
    old_personal = client.store(f"personal {marker('keep')}", user_id=ALICE)
    time.sleep(0.02)
    cutoff = clock()
    time.sleep(0.02)
    new_session = client.store(f"session {marker('new')}", user_id=ALICE, scope="session")
    max_age = timedelta(days=30)
    policy = RetentionPolicy(namespace, Scope.SESSION, max_age)
    assert RetentionPolicy.parse(f"{namespace}/session=30") == policy

    erased = sweep_retention(store, client.context.eraser, [policy], lambda: cutoff + max_age)

    assert erased == 2
    for event_id in old_session:
        assert client.get_event(event_id) is None
        assert client.get_event_nodes(event_id) == []
    for event_id in (old_personal, new_session):
        assert client.get_event(event_id) is not None
    assert sweep_retention(store, client.context.eraser, [policy], lambda: cutoff + max_age) == 0

    run_jobs(client)
    requests = {e.erasure_request_id for e in store.get_events(old_session)}
    assert len(requests) == 2
    assert None not in requests
    for request_id in requests:
        assert request_id is not None
        payload = client.verify_certificate(completed(client.erasure_status(request_id)))
        assert payload["request"]["reason"] == "ttl_expired"
        assert payload["request"]["legal_ground"] == RETENTION_LEGAL_GROUND
        assert payload["request"]["kind"] == "delete_event"
        assert payload["request"]["requested_by"] == store.codec.pseudonym(
            "actor", "oblivio:retention"
        )
        assert payload["erasure"]["events_erased"] == 1
        assert payload["key_destruction"] is None
        assert all(p["equal"] for p in payload["projections"])
    assert store.verify().ok
