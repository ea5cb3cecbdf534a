"""Key providers: the keyring file, the environment, rotation, retirement, subject identity.

Store-level tests run on both backends (``any_database_url``); tests of a provider
alone need no database.
"""

from __future__ import annotations

import base64
import json
import os
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from eventstore import (
    EnvKeyProvider,
    Erasure,
    EventStore,
    InvalidInputError,
    KekRetiredError,
    KeyProvider,
    KeyringFile,
    KeyUnavailableError,
    NewEvent,
    create_backend,
)
from eventstore.crypto import random_key
from eventstore.rewrap import rewrap_batch
from eventstore.schema import data_keys

OpenStore = Callable[[KeyProvider], EventStore]


@pytest.fixture
def open_store(any_database_url: str) -> Iterator[OpenStore]:
    """Opens stores on one database (each backend in turn), closed after the test."""
    opened: list[EventStore] = []

    def open_(keys: KeyProvider) -> EventStore:
        opened.append(EventStore(create_backend(any_database_url), keys))
        return opened[-1]

    yield open_
    for store in opened:
        store.close()


def remember(store: EventStore, subject: str, content: str) -> int:
    """Append one event; the id of the stream it went to."""
    [event] = store.append("default", subject, [NewEvent("memory.stored", {"content": content})])
    return event.stream.stream_id


def contents(store: EventStore, subject: str) -> list[str]:
    return [e.data["content"] for e in store.read_stream("default", subject) if e.data]


def wrapping_versions(store: EventStore) -> dict[int, int]:
    """KEK version of each stream's data key, by stream id."""
    with store.backend.read_connection() as conn:
        rows = conn.execute(sa.select(data_keys.c.stream_id, data_keys.c.kek_version)).all()
    return {row.stream_id: row.kek_version for row in rows}


def file_mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


# -- the keyring file ------------------------------------------------------------------


def test_keyring_file_is_created_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    path = tmp_path / "new-data-dir" / "keyring.json"
    previous = os.umask(0)
    try:
        keyring = KeyringFile(path)
    finally:
        os.umask(previous)
    assert file_mode(path) == 0o600
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    document = json.loads(path.read_text())
    assert (document["format"], document["active"]) == (1, 1)
    assert [r.version for r in keyring.kek_records()] == [1]
    assert len(keyring.kek(1)) == len(keyring.subject_hmac_key()) == 32


def test_keyring_file_stays_0600_after_rotation_and_retirement(keyring: KeyringFile) -> None:
    keyring.rotate()
    assert file_mode(keyring.path) == 0o600
    keyring.retire(1)
    assert file_mode(keyring.path) == 0o600
    # No temporary copies of the secret are left behind; the lock file that
    # serialises rotations holds nothing.
    files = sorted(p.name for p in keyring.path.parent.iterdir())
    assert files == ["keyring.json", "keyring.json.lock"]
    assert (keyring.path.parent / "keyring.json.lock").read_bytes() == b""


def test_reopening_the_keyring_reuses_its_keys_without_rewriting_it(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    first = KeyringFile(path)
    written = path.read_bytes()
    second = KeyringFile(path)
    assert path.read_bytes() == written
    assert second.subject_hmac_key() == first.subject_hmac_key()
    assert second.kek(1) == first.kek(1)
    assert second.active_kek_version == first.active_kek_version == 1


def test_a_keyring_of_an_unknown_format_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    KeyringFile(path)
    document = json.loads(path.read_text())
    path.write_text(json.dumps(dict(document, format=99)))
    with pytest.raises(InvalidInputError, match="format"):
        KeyringFile(path)


def test_a_second_store_on_the_same_database_and_keyring_reads_the_first_ones_events(
    open_store: OpenStore, tmp_path: Path
) -> None:
    path = tmp_path / "keyring.json"
    first = open_store(KeyringFile(path))
    remember(first, "alice", "lives in Boston")
    second = open_store(KeyringFile(path))
    assert contents(second, "alice") == ["lives in Boston"]
    assert second.subject_ref("default", "alice") == first.subject_ref("default", "alice")
    remember(second, "alice", "moved to Chicago")
    assert contents(first, "alice") == ["lives in Boston", "moved to Chicago"]


# -- rotation and retirement -------------------------------------------------------------


def test_rotation_wraps_new_data_keys_under_the_new_version_and_old_ones_still_unwrap(
    open_store: OpenStore, keyring: KeyringFile
) -> None:
    store = open_store(keyring)
    alice = remember(store, "alice", "before rotation")
    assert keyring.rotate() == 2
    assert keyring.active_kek_version == 2
    assert [r.version for r in keyring.kek_records()] == [1, 2]
    assert keyring.kek(2) != keyring.kek(1)
    bob = remember(store, "bob", "after rotation")
    assert wrapping_versions(store) == {alice: 1, bob: 2}
    remember(store, "alice", "still writable")
    assert contents(store, "alice") == ["before rotation", "still writable"]
    assert contents(store, "bob") == ["after rotation"]
    reopened = open_store(KeyringFile(keyring.path))
    assert reopened.codec.keys.active_kek_version == 2
    assert contents(reopened, "alice") == ["before rotation", "still writable"]


def test_retiring_a_version_deletes_its_material_and_with_it_every_key_it_wraps(
    open_store: OpenStore, keyring: KeyringFile
) -> None:
    store = open_store(keyring)
    remember(store, "alice", "under version 1")
    old_material = b64(keyring.kek(1))
    keyring.rotate()
    remember(store, "bob", "under version 2")
    keyring.retire(1)
    [retired, active] = keyring.kek_records()
    assert (retired.key, active.version) == (None, 2)
    assert retired.retired_at is not None
    assert old_material not in keyring.path.read_text()
    for keys in (keyring, KeyringFile(keyring.path)):
        with pytest.raises(KeyUnavailableError):
            keys.kek(1)
    # Alice's data key is wrapped under version 1 and nothing re-wrapped it: her
    # events read as unreadable (like erased ones) instead of breaking every reader
    # of the whole log, and nothing more can be written to her stream.
    [event] = store.read_stream("default", "alice")
    assert (event.erasure, event.data) == (Erasure.KEY_RETIRED, None)
    assert all(e.data is not None for e in store.read_all().events if e.erasure is None)
    with pytest.raises(KeyUnavailableError):
        remember(store, "alice", "more")
    assert contents(store, "bob") == ["under version 2"]
    assert store.verify().ok  # the chain needs no keys


def test_the_active_version_cannot_be_retired(keyring: KeyringFile) -> None:
    with pytest.raises(InvalidInputError):
        keyring.retire(1)
    keyring.rotate()
    saved = keyring.path.read_bytes()
    with pytest.raises(InvalidInputError):
        keyring.retire(2)
    with pytest.raises(KeyUnavailableError):
        keyring.retire(7)
    assert keyring.path.read_bytes() == saved
    records = KeyringFile(keyring.path).kek_records()
    assert [(r.key is not None, r.retired_at) for r in records] == [(True, None), (True, None)]


# Several processes may hold the same keyring file open: `oblivio serve`, a worker
# whose scheduler rotates keys, an operator's CLI.  Each KeyringFile loads the file
# once and writes its whole in-memory copy back on rotate/retire.


def test_a_store_keeps_reading_after_another_handle_rotates_and_rewraps(
    sqlite_url: str, keyring: KeyringFile
) -> None:
    rotating = EventStore(create_backend(sqlite_url), keyring)
    serving = EventStore(create_backend(sqlite_url), KeyringFile(keyring.path))
    try:
        remember(serving, "alice", "lives in Boston")
        keyring.rotate()
        with rotating.transaction() as tx:
            assert rewrap_batch(tx.connection, rotating.codec, 100) == 1
        assert contents(serving, "alice") == ["lives in Boston"]
    finally:
        rotating.close()
        serving.close()


def test_rotating_from_a_stale_handle_keeps_versions_it_has_not_seen(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    first, stale = KeyringFile(path), KeyringFile(path)
    first.rotate()
    stale.rotate()
    on_disk = KeyringFile(path)
    assert on_disk.kek(2) == first.kek(2), "a rotation replaced another handle's KEK version 2"
    assert on_disk.active_kek_version == 3


def test_a_stale_handle_cannot_bring_retired_material_back(tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    first = KeyringFile(path)
    first.rotate()
    stale = KeyringFile(path)
    first.retire(1)
    stale.rotate()
    with pytest.raises(KeyUnavailableError):
        KeyringFile(path).kek(1)


# -- keys from the environment -------------------------------------------------------


@pytest.fixture
def env_keys() -> dict[str, bytes]:
    return {"kek1": random_key(), "kek2": random_key(), "hmac": random_key()}


def environ(keks: str, hmac_key: str) -> dict[str, str]:
    return {"OBLIVIO_KEKS": keks, "OBLIVIO_SUBJECT_HMAC_KEY": hmac_key}


def test_env_provider_parses_versions_and_makes_the_highest_active(
    env_keys: dict[str, bytes],
) -> None:
    keks = f" 2:{b64(env_keys['kek2'])}, 1:{b64(env_keys['kek1'])}, "
    provider = EnvKeyProvider.from_environ(environ(keks, b64(env_keys["hmac"])))
    assert provider.active_kek_version == 2
    assert (provider.kek(1), provider.kek(2)) == (env_keys["kek1"], env_keys["kek2"])
    assert provider.subject_hmac_key() == env_keys["hmac"]
    with pytest.raises(KeyUnavailableError):
        provider.kek(3)


def test_env_provider_reads_the_process_environment_by_default(
    env_keys: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in environ(f"1:{b64(env_keys['kek1'])}", b64(env_keys["hmac"])).items():
        monkeypatch.setenv(name, value)
    provider = EnvKeyProvider.from_environ()
    assert provider.kek(provider.active_kek_version) == env_keys["kek1"]


MALFORMED_KEKS = {
    "empty": "",
    "only commas": " , ,",
    "no version": "{k}",
    "no key": "1:",
    "version not a number": "x:{k}",
    "negative version": "-1:{k}",
    "superscript digit": "\u00b2:{k}",  # str.isdigit() accepts it, int() does not
    "not base64": "1:not-base64!",
    "short key": "1:" + b64(bytes(16)),
    "one good one bad": "1:{k},2",
}


@pytest.mark.parametrize("keks", list(MALFORMED_KEKS.values()), ids=list(MALFORMED_KEKS))
def test_malformed_keks_are_refused(keks: str, env_keys: dict[str, bytes]) -> None:
    value = keks.format(k=b64(env_keys["kek1"]))
    with pytest.raises(InvalidInputError):
        EnvKeyProvider.from_environ(environ(value, b64(env_keys["hmac"])))


@pytest.mark.parametrize("hmac_key", ["", "not base64!", b64(bytes(31)), b64(bytes(33))])
def test_a_malformed_subject_hmac_key_is_refused(hmac_key: str, env_keys: dict[str, bytes]) -> None:
    with pytest.raises(InvalidInputError):
        EnvKeyProvider.from_environ(environ(f"1:{b64(env_keys['kek1'])}", hmac_key))


@pytest.mark.parametrize("missing", ["OBLIVIO_KEKS", "OBLIVIO_SUBJECT_HMAC_KEY"])
def test_missing_variables_are_reported_as_unavailable_keys(
    missing: str, env_keys: dict[str, bytes]
) -> None:
    env = environ(f"1:{b64(env_keys['kek1'])}", b64(env_keys["hmac"]))
    del env[missing]
    with pytest.raises(KeyUnavailableError, match=missing):
        EnvKeyProvider.from_environ(env)


# -- the subject HMAC key defines who is who on disk ----------------------------------


def test_another_hmac_key_cannot_find_alices_stream(
    open_store: OpenStore, env_keys: dict[str, bytes]
) -> None:
    keks = f"1:{b64(env_keys['kek1'])}"
    ours = open_store(EnvKeyProvider.from_environ(environ(keks, b64(env_keys["hmac"]))))
    alice = remember(ours, "alice", "lives in Boston")
    same = open_store(EnvKeyProvider.from_environ(environ(keks, b64(env_keys["hmac"]))))
    assert contents(same, "alice") == ["lives in Boston"]

    # Same KEK, other HMAC key: alice is someone else on disk.
    other = open_store(EnvKeyProvider.from_environ(environ(keks, b64(random_key()))))
    assert other.subject_ref("default", "alice") != ours.subject_ref("default", "alice")
    assert other.read_stream("default", "alice") == []
    assert other.head("default", "alice") is None
    assert remember(other, "alice", "a namesake") != alice
    assert contents(ours, "alice") == ["lives in Boston"]
    assert ours.verify().ok


def test_stores_with_separate_keyrings_do_not_share_subjects(
    open_store: OpenStore, tmp_path: Path
) -> None:
    ours = open_store(KeyringFile(tmp_path / "ours.json"))
    theirs = open_store(KeyringFile(tmp_path / "theirs.json"))
    remember(ours, "alice", f"secret {uuid.uuid4()}")
    assert theirs.read_stream("default", "alice") == []
    assert theirs.head("default", "alice") is None


def test_a_kek_version_missing_from_a_process_is_an_error_not_erased_data(
    open_store: OpenStore, keyring: KeyringFile
) -> None:
    """Only a retired KEK reads as erased; a version this process lacks must be loud."""
    store = open_store(keyring)
    remember(store, "alice", "wrapped under version 1")
    kek = b64(keyring.kek(1))
    hmac_key = b64(keyring.subject_hmac_key())
    lacking = EnvKeyProvider.from_environ(
        {"OBLIVIO_KEKS": f"2:{b64(random_key())}", "OBLIVIO_SUBJECT_HMAC_KEY": hmac_key}
    )
    misconfigured = open_store(lacking)
    with pytest.raises(KeyUnavailableError) as caught:
        misconfigured.read_stream("default", "alice")
    assert not isinstance(caught.value, KekRetiredError)
    complete = EnvKeyProvider.from_environ(
        {"OBLIVIO_KEKS": f"1:{kek}", "OBLIVIO_SUBJECT_HMAC_KEY": hmac_key}
    )
    assert contents(open_store(complete), "alice") == ["wrapped under version 1"]
