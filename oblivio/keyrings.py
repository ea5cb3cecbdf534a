"""Where a store's keyring file lives, and which keyrings have outlived their store.

The keyring (KEKs and the subject HMAC key) is kept outside the data
directory, one file per store in the keyring directory, named by the store id
recorded in the store's database (``eventstore.identity``).  A copy of the
data directory therefore decrypts nothing on its own, which is what the
residual-copies statement of every forget certificate relies on: once a KEK
version is retired, no copy of the data can be unwrapped any more.

The certificate signing keys (the issuer keyring) live beside it, in
``<store id>.issuer.json``: a copy of the data directory must not carry the
key that signs forget certificates either.

Older versions kept ``keyring.json`` and ``issuer-keys.json`` inside the data
directory; opening such a store moves them here and says so once.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from eventstore.backends.port import Backend
from eventstore.errors import KeyUnavailableError
from eventstore.identity import holds_streams, look_up_store, store_id
from eventstore.keys import KeyringFile, move_keyring
from oblivio.settings import Settings

if TYPE_CHECKING:
    from certificates import IssuerKeyring

log = logging.getLogger(__name__)

#: Where oblivio 0.1 kept the keyring: inside the data directory.
LEGACY_KEYRING = "keyring.json"
#: Where oblivio 0.1 kept the certificate signing keys: inside the data directory too.
LEGACY_ISSUER_KEYS = "issuer-keys.json"
KEYRING_SUFFIX = ".json"
ISSUER_KEYS_SUFFIX = ".issuer.json"


def open_keyring(settings: Settings, backend: Backend) -> KeyringFile:
    """The store's keyring: an explicit ``keyring_path``, else ``<keyring dir>/<store id>.json``.

    A keyring left in the data directory by an older version is moved there
    first.  A store that already holds streams but whose keyring is missing is
    refused rather than given fresh keys that could not decrypt it.
    """
    if settings.keyring_path is not None:
        return KeyringFile(settings.keyring_path)
    identity = store_id(backend)
    target = keyring_file(settings.keyring_directory, identity)
    description = {"id": str(identity), "database": database_location(backend)}
    legacy = settings.data_dir / LEGACY_KEYRING
    if legacy.exists() and move_keyring(legacy, target, description):
        log.warning(
            "moved the keyring of store %s out of the data directory, from %s to %s: "
            "a copy of the data directory no longer holds its keys. Back up this file "
            "apart from the data (docs/operations.md, 'Where the keyring lives').",
            identity,
            legacy,
            target,
        )
    elif not target.exists() and holds_streams(backend):
        raise KeyUnavailableError(
            f"the keyring of store {identity} is missing: no {target.name} in "
            f"{target.parent}. Restore it from the keyring backup, or point "
            "OBLIVIO_KEYRING_DIR at the directory that holds it; without it the "
            "store's data cannot be decrypted"
        )
    if target.resolve().is_relative_to(settings.data_dir.resolve()):
        # E.g. HOME inside the data directory, as in a container whose home is its volume.
        log.warning(
            "the keyring %s is inside the data directory %s: a copy of the data holds the "
            "keys that decrypt it. Set OBLIVIO_KEYRING_DIR to a directory outside it.",
            target,
            settings.data_dir,
        )
    return KeyringFile(target, store=description)


def keyring_file(directory: Path, identity: uuid.UUID) -> Path:
    return directory / f"{identity}{KEYRING_SUFFIX}"


# -- the certificate signing keys ---------------------------------------------------


def open_issuer_keys(settings: Settings, backend: Backend) -> IssuerKeyring:
    """The store's issuer keyring, kept with its keyring (created on first use).

    An explicit ``issuer_keys_path`` wins; beside an explicit ``keyring_path`` it is
    ``<keyring name>.issuer.json``; else ``<keyring dir>/<store id>.issuer.json``.
    A file left in the data directory by an older version is moved there first.
    """
    from certificates import IssuerKeyring

    target = issuer_keys_file(settings, backend)
    legacy = settings.data_dir / LEGACY_ISSUER_KEYS
    if settings.issuer_keys_path is None and legacy.exists() and _move_issuer_keys(legacy, target):
        log.warning(
            "moved the certificate signing keys out of the data directory, from %s to %s: "
            "a copy of the data directory no longer carries them. Back up this file with "
            "the keyring (docs/operations.md, 'Issuer keys and the JWKS').",
            legacy,
            target,
        )
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return IssuerKeyring.open(target)


def issuer_keys_file(settings: Settings, backend: Backend) -> Path:
    if settings.issuer_keys_path is not None:
        return settings.issuer_keys_path
    if settings.keyring_path is not None:
        keyring = settings.keyring_path
        return keyring.with_name(keyring.name.removesuffix(KEYRING_SUFFIX) + ISSUER_KEYS_SUFFIX)
    return settings.keyring_directory / f"{store_id(backend)}{ISSUER_KEYS_SUFFIX}"


def _move_issuer_keys(legacy: Path, target: Path) -> bool:
    """Copy ``legacy`` to ``target`` (0600) unless the same keys are there, then remove it.

    Never overwrites other keys: two different issuer keyrings for one store are
    refused, both kept, for the operator to choose.  False when ``legacy`` had gone.
    """
    from certificates import IssuerKeyring, KeyringError

    try:
        moving = IssuerKeyring.load(legacy)
    except KeyringError:
        if not legacy.exists():  # another process moved it first
            return False
        raise
    if target.exists():
        if IssuerKeyring.load(target).jwks() != moving.jwks():
            raise KeyringError(
                f"two different issuer keyrings for one store: {legacy} and {target}; keep "
                "the one whose keys your published JWKS lists and remove the other"
            )
    else:
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        moving.save(target)
    legacy.unlink(missing_ok=True)
    return True


def database_location(backend: Backend) -> str:
    """Where the store's database is, for the keyring to remember (never a password)."""
    url = backend.engine.url
    if url.get_backend_name() == "sqlite" and url.database:
        return url.set(database=str(Path(url.database).resolve())).render_as_string()
    return url.render_as_string(hide_password=True)


# -- which keyrings still have a store ---------------------------------------------


@dataclass(frozen=True)
class KeyringEntry:
    """One keyring file and what became of its store."""

    path: Path
    store_id: str
    database: str | None
    state: str  # "in use" | "orphaned" | "unknown"
    detail: str
    #: The store's certificate signing keys beside it, if there are any.
    issuer_keys: Path | None = None


def list_keyrings(directory: Path) -> list[KeyringEntry]:
    """Every keyring file in ``directory``, each with the state of its store."""
    if not directory.is_dir():
        return []
    keyrings = (
        path
        for path in sorted(directory.glob(f"*{KEYRING_SUFFIX}"))
        if not path.name.endswith(ISSUER_KEYS_SUFFIX)
    )
    return [_entry(path) for path in keyrings]


def prune_keyring(path: Path) -> KeyringEntry | None:
    """Delete the keyring file at ``path``, and its store's certificate signing keys, if
    its store is gone; what was deleted, or None (the store is in use, or unknown).

    The store's state is judged here, at the moment of deleting, not taken from an
    earlier listing: a store that came back in between keeps its keys.  Deleting
    destroys the keys for good, which is the point (any copy of that store's data
    becomes unreadable) and the danger: a store moved elsewhere and not opened
    since still names its old place, and looks gone.
    """
    entry = _entry(path)
    if entry.state != "orphaned":
        return None
    # The signing keys first: a prune cut short leaves the keyring, which the next
    # listing still shows, rather than signing keys no listing names.
    if entry.issuer_keys is not None:
        entry.issuer_keys.unlink(missing_ok=True)
    path.unlink(missing_ok=True)
    return entry


def _entry(path: Path) -> KeyringEntry:
    issuer = path.with_name(path.name.removesuffix(KEYRING_SUFFIX) + ISSUER_KEYS_SUFFIX)
    entry = _keyring_entry(path)
    return entry if not issuer.exists() else replace(entry, issuer_keys=issuer)


def _keyring_entry(path: Path) -> KeyringEntry:
    try:
        recorded = json.loads(path.read_text()).get("store", {})
    except (OSError, ValueError) as e:
        return KeyringEntry(path, path.stem, None, "unknown", f"unreadable: {e}")
    database = recorded.get("database")
    identity = str(recorded.get("id", path.stem))
    if not database:
        return KeyringEntry(path, identity, None, "unknown", "the keyring names no database")
    state, detail = _store_state(database, identity)
    return KeyringEntry(path, identity, database, state, detail)


def _store_state(database: str, identity: str) -> tuple[str, str]:
    found = look_up_store(database)
    if found.state == "gone":
        return "orphaned", found.detail
    if found.state == "unreachable":
        return "unknown", found.detail
    store = None if found.store_id is None else str(found.store_id)
    return _compare(store, identity, found.detail)


def _compare(found: str | None, identity: str, where: str) -> tuple[str, str]:
    if found == identity:
        return "in use", f"store {identity} is at {where}"
    return "orphaned", f"{where} now holds {'another store' if found else 'no store id'}"
