"""Keyrings outside the data directory: one per store, named by the store id in its database."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import stat
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from certificates import IssuerKeyring, KeyringError
from eventstore import KeyringFile, KeyUnavailableError
from eventstore.backends.postgres import normalise_postgres_url
from eventstore.identity import read_store_id
from oblivio import MemoryClient
from oblivio.cli import main
from oblivio.keyrings import list_keyrings, prune_keyring
from oblivio.settings import Settings, default_keyring_dir
from tests.conftest import database_url

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def own_keyring_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A keyring directory of this test's own, for tests that list every keyring in it."""
    keyrings = tmp_path / "keyrings"
    monkeypatch.setenv("OBLIVIO_KEYRING_DIR", str(keyrings))
    return keyrings


def settings_for(backend: str, data_dir: Path, request: pytest.FixtureRequest) -> Settings:
    url = None if backend == "sqlite" else request.getfixturevalue("postgres_url")
    return Settings.from_env(data_dir=data_dir, database_url=url)


def store_id_of(client: MemoryClient) -> uuid.UUID:
    with client.context.store.backend.engine.connect() as conn:
        found = read_store_id(conn)
    assert found is not None
    return found


def keyring_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "oblivio.keyrings"]


def keyring_warnings_on_opening(
    caplog: pytest.LogCaptureFixture, store: Path | Settings
) -> list[str]:
    """What opening (and closing) a client on ``store`` warns about keyrings, alone."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="oblivio.keyrings"):
        client = (
            MemoryClient(settings=store) if isinstance(store, Settings) else MemoryClient(store)
        )
        client.close()
    return keyring_warnings(caplog)


def files_bytes(directory: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())


def test_the_default_directory_follows_xdg_config_home_then_the_home_directory() -> None:
    assert default_keyring_dir({"XDG_CONFIG_HOME": "/etc/xdg-here"}) == Path(
        "/etc/xdg-here/oblivio/keyrings"
    )
    home_default = Path.home() / ".config" / "oblivio" / "keyrings"
    assert default_keyring_dir({}) == home_default
    assert default_keyring_dir({"XDG_CONFIG_HOME": "relative/dir"}) == home_default  # per spec
    assert Settings.from_env({"OBLIVIO_KEYRING_DIR": "/srv/keys"}).keyring_directory == Path(
        "/srv/keys"
    )


def test_the_suite_keeps_keyrings_out_of_the_home_directory(
    keyring_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings.from_env().keyring_directory == keyring_dir
    monkeypatch.delenv("OBLIVIO_KEYRING_DIR")
    assert Settings().keyring_directory == keyring_dir  # through XDG_CONFIG_HOME
    assert not keyring_dir.is_relative_to(Path.home() / ".config")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_store_keeps_its_keyring_outside_the_data_directory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, keyring_dir: Path
) -> None:
    data_dir = tmp_path / "data"
    with MemoryClient(settings=settings_for(backend, data_dir, request)) as client:
        client.store("My locker code is 4711.", user_id="ana")
        identity = store_id_of(client)
        keyring = client.context.store.codec.keys
    assert isinstance(keyring, KeyringFile)
    assert keyring.path == keyring_dir / f"{identity}.json"
    assert stat.S_IMODE(keyring.path.stat().st_mode) == 0o600
    assert keyring.store["id"] == str(identity)
    assert not list(data_dir.glob("keyring*"))
    with MemoryClient(settings=settings_for(backend, data_dir, request)) as again:
        assert store_id_of(again) == identity
        assert [e.content for e in again.get_events(user_id="ana")] == ["My locker code is 4711."]


@pytest.mark.postgres
def test_databases_cloned_from_one_template_get_ids_of_their_own(
    tmp_path: Path, postgres_server_url: str, postgres_template: str, postgres_url: str
) -> None:
    template = sa.create_engine(
        normalise_postgres_url(database_url(postgres_server_url, postgres_template))
    )
    with template.connect() as conn:
        assert read_store_id(conn) is None  # ids are written on open, not by migrations
    template.dispose()
    with MemoryClient(settings=Settings(data_dir=tmp_path, database_url=postgres_url)) as client:
        assert store_id_of(client).version == 4


def keyring_of_a_store(data_dir: Path, memory: str = "I keep bees.") -> KeyringFile:
    """Open a store in ``data_dir``, store ``memory`` for ana; the keyring file it keeps."""
    with MemoryClient(data_dir) as client:
        client.store(memory, user_id="ana")
        keyring = client.context.store.codec.keys
    assert isinstance(keyring, KeyringFile)
    return keyring


def test_a_copied_data_directory_holds_no_key_and_decrypts_nothing(
    tmp_path: Path, keyring_dir: Path
) -> None:
    data_dir = tmp_path / "data"
    with MemoryClient(data_dir) as client:
        client.store("My locker code is 4711.", user_id="ana")
        keyring = client.context.store.codec.keys
        issuer_path = client.context.issuer.path
    assert isinstance(keyring, KeyringFile)
    assert issuer_path is not None
    copy = tmp_path / "stolen-copy"
    shutil.copytree(data_dir, copy)

    # What the certificate's residual-copies statement relies on: the copy holds
    # data keys only wrapped under a KEK that is not in it.
    copied = files_bytes(copy)
    kek = keyring.kek(keyring.active_kek_version)
    for secret in (kek, keyring.subject_hmac_key()):
        assert secret not in copied
        assert base64.b64encode(secret) not in copied
    # Nor does it carry the key that signs forget certificates.
    signing = json.loads(issuer_path.read_text())["keys"][0]["d"]
    assert signing.encode() not in copied
    assert not list(copy.glob("issuer*"))

    elsewhere = tmp_path / "another-machine-keyrings"
    with pytest.raises(KeyUnavailableError, match=r"keyring of store .* is missing"):
        MemoryClient(settings=Settings(data_dir=copy, keyring_dir=elsewhere))
    assert not elsewhere.exists() or not list(elsewhere.iterdir())  # no fresh keys made up


def test_restoring_needs_the_data_and_its_keyring(tmp_path: Path, keyring_dir: Path) -> None:
    data_dir, backup = tmp_path / "data", tmp_path / "backup"
    keyring_path = keyring_of_a_store(data_dir).path
    shutil.copytree(data_dir, backup / "data")
    shutil.copy2(keyring_path, backup / keyring_path.name)
    shutil.rmtree(data_dir)
    keyring_path.unlink()

    restored_keys = tmp_path / "restored-keyrings"
    shutil.copytree(backup / "data", data_dir)
    restored_keys.mkdir()
    shutil.copy2(backup / keyring_path.name, restored_keys / keyring_path.name)
    with MemoryClient(settings=Settings(data_dir=data_dir, keyring_dir=restored_keys)) as client:
        assert [e.content for e in client.get_events(user_id="ana")] == ["I keep bees."]


def test_a_keyring_in_the_data_directory_is_moved_out_with_a_message(
    tmp_path: Path, keyring_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "data"
    legacy = data_dir / "keyring.json"  # where oblivio 0.1 kept it, with the issuer keys
    layout = Settings(
        data_dir=data_dir, keyring_path=legacy, issuer_keys_path=data_dir / "issuer-keys.json"
    )
    with MemoryClient(settings=layout) as old:
        old.store("I keep bees.", user_id="ana")
    legacy.with_name("keyring.json.lock").touch()
    material = json.loads(legacy.read_text())

    with caplog.at_level(logging.WARNING, logger="oblivio.keyrings"):
        client = MemoryClient(data_dir)
    with client:
        assert [e.content for e in client.get_events(user_id="ana")] == ["I keep bees."]
        identity = store_id_of(client)
    moved = keyring_dir / f"{identity}.json"
    assert not legacy.exists()
    assert not list(data_dir.glob("keyring*"))
    document = json.loads(moved.read_text())
    assert document["keks"] == material["keks"]
    assert document["store"]["id"] == str(identity)
    assert stat.S_IMODE(moved.stat().st_mode) == 0o600
    [message] = [m for m in keyring_warnings(caplog) if str(legacy) in m]
    assert str(moved) in message
    assert "Back up" in message
    assert sorted(p.name for p in data_dir.iterdir()) == ["oblivio.sqlite3"]  # issuer keys too
    assert keyring_warnings_on_opening(caplog, data_dir) == []  # again: moves nothing


def test_a_conflicting_legacy_keyring_is_refused_and_both_are_kept(
    tmp_path: Path, keyring_dir: Path
) -> None:
    data_dir = tmp_path / "data"
    current = keyring_of_a_store(data_dir).path
    stray = KeyringFile(data_dir / "keyring.json")  # other keys, e.g. restored by mistake
    with pytest.raises(KeyUnavailableError, match="two different keyrings"):
        MemoryClient(data_dir)
    assert stray.path.exists()
    assert current.exists()


def test_the_certificate_signing_keys_are_kept_with_the_keyring(
    tmp_path: Path, keyring_dir: Path
) -> None:
    data_dir = tmp_path / "data"
    with MemoryClient(data_dir) as client:
        client.store("I keep bees.", user_id="ana")
        identity = store_id_of(client)
        certificate = client.forget("ana", wait=True).certificate
        issuer = client.context.issuer
    assert issuer.path == keyring_dir / f"{identity}.issuer.json"
    assert stat.S_IMODE(issuer.path.stat().st_mode) == 0o600
    assert sorted(p.name for p in data_dir.iterdir() if "issuer" in p.name) == []
    assert certificate is not None
    with MemoryClient(data_dir) as again:  # the same keys, found by the store id
        assert again.context.issuer.active.kid == issuer.active.kid
        again.verify_certificate(certificate)


def test_issuer_keys_in_the_data_directory_are_moved_out_with_a_message(
    tmp_path: Path, keyring_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "data"
    with MemoryClient(data_dir) as client:
        identity = store_id_of(client)
    client.context.issuer.path.unlink()  # type: ignore[union-attr]
    legacy = data_dir / "issuer-keys.json"  # where oblivio 0.1 kept them
    old_kid = IssuerKeyring.open(legacy).active.kid

    with (
        caplog.at_level(logging.WARNING, logger="oblivio.keyrings"),
        MemoryClient(data_dir) as client,
    ):
        assert client.context.issuer.active.kid == old_kid
    moved = keyring_dir / f"{identity}.issuer.json"
    assert not legacy.exists()
    assert IssuerKeyring.load(moved).active.kid == old_kid
    assert stat.S_IMODE(moved.stat().st_mode) == 0o600
    [message] = keyring_warnings(caplog)
    assert str(legacy) in message
    assert str(moved) in message
    assert keyring_warnings_on_opening(caplog, data_dir) == []  # again: moves nothing


def test_conflicting_issuer_keys_are_refused_and_both_kept(
    tmp_path: Path, keyring_dir: Path
) -> None:
    data_dir = tmp_path / "data"
    with MemoryClient(data_dir) as client:
        current = client.context.issuer
    stray = IssuerKeyring.open(data_dir / "issuer-keys.json")  # other keys
    with pytest.raises(KeyringError, match="two different issuer keyrings"):
        MemoryClient(data_dir)
    assert stray.path is not None
    assert stray.path.exists()
    assert current.path is not None
    assert IssuerKeyring.load(current.path).active.kid == current.active.kid


def test_a_store_whose_keyring_is_missing_is_refused(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    path = keyring_of_a_store(data_dir).path
    path.unlink()
    with pytest.raises(KeyUnavailableError, match="Restore it from the keyring backup"):
        MemoryClient(data_dir)
    assert not path.exists()


def stores_kept_and_removed(tmp_path: Path) -> dict[str, str]:
    """The store ids of two stores, ``kept`` and ``removed``; the second one's data
    directory deleted, its keyring left behind."""
    ids = {}
    for name in ("kept", "removed"):
        with MemoryClient(tmp_path / name) as client:
            ids[name] = str(store_id_of(client))
    shutil.rmtree(tmp_path / "removed")
    return ids


def test_keys_keyrings_lists_the_keyrings_whose_store_is_gone(
    tmp_path: Path, own_keyring_dir: Path
) -> None:
    keyring_dir = own_keyring_dir
    kept = tmp_path / "kept"
    ids = stores_kept_and_removed(tmp_path)
    runner = CliRunner()

    listing = runner.invoke(main, ["keys", "keyrings", "--json"])
    assert listing.exit_code == 0, listing.output
    states = {entry["store_id"]: entry["state"] for entry in json.loads(listing.output)}
    assert states == {ids["kept"]: "in use", ids["removed"]: "orphaned"}
    issuer_files = {entry["store_id"]: entry["issuer_keys"] for entry in json.loads(listing.output)}
    assert issuer_files == {i: str(keyring_dir / f"{i}.issuer.json") for i in ids.values()}

    only_orphans = runner.invoke(main, ["keys", "keyrings", "--orphaned"])
    assert only_orphans.exit_code == 0, only_orphans.output
    assert ids["removed"] in only_orphans.output
    assert ids["kept"] not in only_orphans.output
    assert "no database at" in only_orphans.output

    shutil.rmtree(kept)
    for leftover in keyring_dir.iterdir():
        leftover.unlink()
    empty = runner.invoke(main, ["keys", "keyrings"])
    assert empty.output.startswith("no keyrings in ")


def test_a_keyring_whose_database_holds_another_store_or_none_is_orphaned(
    tmp_path: Path, own_keyring_dir: Path
) -> None:
    """The store id is read from the database read-only; a database that holds no
    oblivio store, or another one, leaves the keyring orphaned."""
    with MemoryClient(tmp_path / "store") as client:
        identity = str(store_id_of(client))
    keyring = own_keyring_dir / f"{identity}.json"
    recorded = json.loads(keyring.read_text())
    elsewhere = tmp_path / "elsewhere.sqlite3"
    elsewhere.touch()  # an empty SQLite database
    recorded["store"]["database"] = f"sqlite:///{elsewhere}"
    keyring.write_text(json.dumps(recorded))
    [entry] = list_keyrings(own_keyring_dir)
    assert (entry.state, entry.detail.split(" (")[0]) == (
        "orphaned",
        f"{elsewhere} is not an oblivio database",
    )

    shutil.copy(tmp_path / "store" / "oblivio.sqlite3", elsewhere)
    engine = sa.create_engine(f"sqlite:///{elsewhere}")
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE store_identity SET value = :v"), {"v": str(uuid.uuid4())})
    engine.dispose()
    [entry] = list_keyrings(own_keyring_dir)
    assert (entry.state, entry.detail) == ("orphaned", f"{elsewhere} now holds another store")


def test_keys_keyrings_prunes_only_the_keyrings_whose_store_is_gone(
    tmp_path: Path, own_keyring_dir: Path
) -> None:
    kept = tmp_path / "kept"
    ids = stores_kept_and_removed(tmp_path)
    unreadable = own_keyring_dir / "damaged.json"  # state unknown: never deleted
    unreadable.write_text("{")
    files = {
        name: (own_keyring_dir / f"{i}.json", own_keyring_dir / f"{i}.issuer.json")
        for name, i in ids.items()
    }
    assert all(path.exists() for pair in files.values() for path in pair)
    runner = CliRunner()
    prune = ["keys", "keyrings", "--prune-orphaned"]

    dry = runner.invoke(main, [*prune, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert ids["removed"] in dry.output
    assert ids["kept"] not in dry.output
    assert "nothing deleted" in dry.output
    declined = runner.invoke(main, prune, input="n\n")
    assert declined.exit_code == 1, declined.output  # aborted
    assert all(path.exists() for pair in files.values() for path in pair)

    # Judged again when deleting: a store moved away at listing time and back since
    # keeps its keys.
    shutil.move(kept, tmp_path / "away")
    looked_gone = {e.store_id for e in list_keyrings(own_keyring_dir) if e.state == "orphaned"}
    assert looked_gone == set(ids.values())
    shutil.move(tmp_path / "away", kept)
    assert prune_keyring(files["kept"][0]) is None

    done = runner.invoke(main, prune, input="y\n")
    assert done.exit_code == 0, done.output
    assert f"deleted {files['removed'][0]}" in done.output
    assert not any(path.exists() for path in files["removed"])
    assert all(path.exists() for path in files["kept"])
    assert unreadable.exists()
    with MemoryClient(kept) as client:  # the store that still exists still opens
        assert str(store_id_of(client)) == ids["kept"]
    again = runner.invoke(main, [*prune, "--yes"])
    assert again.output.startswith("no orphaned keyrings in "), again.output
    assert runner.invoke(main, ["keys", "keyrings", "--yes"]).exit_code == 2
    assert runner.invoke(main, [*prune, "--json"]).exit_code == 2


@pytest.mark.postgres
def test_keys_keyrings_checks_postgresql_stores(
    tmp_path: Path, postgres_server_url: str, postgres_url: str, own_keyring_dir: Path
) -> None:
    keyring_dir = own_keyring_dir
    settings = Settings.from_env(data_dir=tmp_path, database_url=postgres_url)
    with MemoryClient(settings=settings) as client:
        live = str(store_id_of(client))
    gone = str(uuid.uuid4())
    missing_db = database_url(postgres_server_url, f"oblivio_gone_{uuid.uuid4().hex[:8]}")
    KeyringFile(keyring_dir / f"{gone}.json", store={"id": gone, "database": missing_db})
    listing = CliRunner().invoke(main, ["keys", "keyrings", "--json"])
    assert listing.exit_code == 0, listing.output
    states = {entry["store_id"]: entry["state"] for entry in json.loads(listing.output)}
    assert states == {live: "in use", gone: "orphaned"}


def test_a_keyring_directory_inside_the_data_directory_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir = tmp_path / "data"
    inside = Settings(data_dir=data_dir, keyring_dir=data_dir / ".config" / "keyrings")
    [message] = keyring_warnings_on_opening(caplog, inside)
    assert "inside the data directory" in message
    assert "OBLIVIO_KEYRING_DIR" in message

    outside = Settings(data_dir=tmp_path / "other-data", keyring_dir=tmp_path / "keyrings")
    assert keyring_warnings_on_opening(caplog, outside) == []
