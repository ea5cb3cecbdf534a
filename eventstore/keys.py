"""Key-encryption keys and the subject HMAC key, behind a small protocol.

Three providers: a keyring file (the embedded default, created 0600 on first
use and kept outside the data directory, see ``oblivio.keyrings``), the
environment (containers), and anything an external KMS adapter implements
against :class:`KeyProvider`.

The subject HMAC key never rotates: it defines subject identity on disk.
KEKs rotate; a retired KEK's material is deleted from the keyring, after which
any wrapped data key left behind in backups or dead rows cannot be unwrapped.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from eventstore.crypto import KEY_BYTES, random_key
from eventstore.errors import InvalidInputError, KekRetiredError, KeyUnavailableError

KEYRING_FORMAT = 1


@runtime_checkable
class KeyProvider(Protocol):
    """Where the log gets its key-encryption keys and subject HMAC key."""

    @property
    def active_kek_version(self) -> int:
        """The KEK version new data keys are wrapped with."""
        ...

    def kek(self, version: int) -> bytes:
        """The KEK of ``version``; raises :class:`KeyUnavailableError` if retired or unknown."""
        ...

    def subject_hmac_key(self) -> bytes:
        """The secret that turns user ids into subject keys."""
        ...


@dataclass
class KekRecord:
    version: int
    key: bytes | None  # None once retired: the material is gone
    created_at: datetime
    retired_at: datetime | None = None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError as e:
        raise InvalidInputError(f"{what} is not valid base64") from e
    if len(raw) != KEY_BYTES:
        raise InvalidInputError(f"{what} must be {KEY_BYTES} bytes")
    return raw


class KeyringFile:
    """A keyring kept as JSON in one file, created with mode 0600.

    Several processes may hold the same keyring.  Each handle re-reads the
    file when it changed on disk, so a version another process added is
    found and a version it retired is gone here too; changes are made under
    an exclusive file lock on a fresh read, so no handle writes back versions
    it has not seen or material that was retired meanwhile.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, store: Mapping[str, str] | None = None
    ) -> None:
        """Open the keyring at ``path``, creating it with fresh keys if there is none.

        ``store`` describes the store a new keyring belongs to (its id and where
        its database is); it is written into the file so that a listing of
        keyrings can tell which stores still exist.  An existing file keeps its own.
        """
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self._store: dict[str, str] = dict(store or {})
        if not self.path.exists():
            self._create()
        self._load()

    @property
    def store(self) -> Mapping[str, str]:
        """The store this keyring was created for (``id``, ``database``), if it says."""
        return self._store

    @property
    def active_kek_version(self) -> int:
        self._refresh()
        return self._active

    def kek(self, version: int) -> bytes:
        self._refresh()
        record = self._keks.get(version)
        if record is None:
            raise KeyUnavailableError(f"KEK version {version} is not in this keyring")
        if record.key is None:
            raise KekRetiredError(f"KEK version {version} was retired")
        return record.key

    def subject_hmac_key(self) -> bytes:
        return self._hmac_key

    def kek_records(self) -> list[KekRecord]:
        self._refresh()
        return sorted(self._keks.values(), key=lambda r: r.version)

    def rotate(self, now: datetime | None = None) -> int:
        """Add a new active KEK version; older versions stay until retired."""
        with self._locked():
            version = max(self._keks) + 1
            self._keks[version] = KekRecord(version, random_key(), now or datetime.now(UTC))
            self._active = version
            self._save()
        return version

    def retire(self, version: int, now: datetime | None = None) -> None:
        """Delete the material of a non-active KEK version for good."""
        with self._locked():
            if version == self._active:
                raise InvalidInputError("the active KEK version cannot be retired")
            record = self._keks.get(version)
            if record is None:
                raise KeyUnavailableError(f"KEK version {version} does not exist")
            record.key = None
            record.retired_at = record.retired_at or now or datetime.now(UTC)
            self._save()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Exclusive lock for read-modify-write of the keyring file."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._load()
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _refresh(self) -> None:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return
        if (stat.st_mtime_ns, stat.st_ino) != self._stamp:
            self._load()

    def _create(self) -> None:
        # Several processes may open a new data directory at once.  Only the
        # first to link its file into place wins; the others load the winner's
        # keys (see _load after _create), so no one encrypts under keys that
        # are then lost.
        now = datetime.now(UTC)
        self._hmac_key = random_key()
        self._keks = {1: KekRecord(1, random_key(), now)}
        self._active = 1
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _write_private(self.path, self._document(), replace=False)

    def _load(self) -> None:
        stat = self.path.stat()
        raw = json.loads(self.path.read_text())
        if raw.get("format") != KEYRING_FORMAT:
            raise InvalidInputError(f"unsupported keyring format in {self.path}")
        self._hmac_key = _unb64(raw["subject_hmac_key"], "subject_hmac_key")
        self._keks = {k.version: k for k in map(_kek_from_json, raw["keks"])}
        self._active = int(raw["active"])
        self._store = {str(k): str(v) for k, v in raw.get("store", {}).items()}
        self._stamp = (stat.st_mtime_ns, stat.st_ino)

    def _save(self) -> None:
        _write_private(self.path, self._document(), replace=True)
        stat = self.path.stat()
        self._stamp = (stat.st_mtime_ns, stat.st_ino)

    def _document(self) -> bytes:
        document: dict[str, Any] = {
            "format": KEYRING_FORMAT,
            "active": self._active,
            "subject_hmac_key": _b64(self._hmac_key),
            "keks": [_kek_to_json(r) for r in self.kek_records()],
        }
        if self._store:
            document["store"] = self._store
        return json.dumps(document, indent=2).encode()


def _kek_to_json(record: KekRecord) -> dict[str, Any]:
    return {
        "version": record.version,
        "key": _b64(record.key) if record.key else None,
        "created_at": record.created_at.isoformat(),
        "retired_at": record.retired_at.isoformat() if record.retired_at else None,
    }


def _kek_from_json(raw: Mapping[str, Any]) -> KekRecord:
    key = raw.get("key")
    return KekRecord(
        version=int(raw["version"]),
        key=_unb64(key, "KEK") if key else None,
        created_at=datetime.fromisoformat(raw["created_at"]),
        retired_at=datetime.fromisoformat(raw["retired_at"]) if raw.get("retired_at") else None,
    )


def _write_private(path: Path, content: bytes, *, replace: bool) -> None:
    """Write ``content`` atomically to a file only the owner can read.

    The temporary file is created 0600 by mkstemp, so the secret is never
    readable by others, not even for the moment between write and rename.
    Without ``replace``, an existing file is kept (``os.link`` fails on it).
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".keyring-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        if replace:
            os.replace(tmp, path)
        else:
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


class EnvKeyProvider:
    """Keys from the environment, for containers.

    ``OBLIVIO_KEKS`` holds ``version:base64key`` pairs separated by commas (the
    highest version is active); ``OBLIVIO_SUBJECT_HMAC_KEY`` holds base64.
    """

    def __init__(self, keks: Mapping[int, bytes], hmac_key: bytes) -> None:
        if not keks:
            raise InvalidInputError("at least one KEK is required")
        self._keks = dict(keks)
        self._hmac_key = hmac_key

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> EnvKeyProvider:
        env = os.environ if environ is None else environ
        try:
            keks_text = env["OBLIVIO_KEKS"]
            hmac_text = env["OBLIVIO_SUBJECT_HMAC_KEY"]
        except KeyError as e:
            raise KeyUnavailableError(f"environment variable {e.args[0]} is not set") from e
        keks: dict[int, bytes] = {}
        for item in filter(None, (part.strip() for part in keks_text.split(","))):
            version, sep, key = item.partition(":")
            if not sep or not re.fullmatch(r"[0-9]{1,9}", version):
                raise InvalidInputError("OBLIVIO_KEKS entries must look like '1:base64key'")
            keks[int(version)] = _unb64(key, f"KEK version {version}")
        return cls(keks, _unb64(hmac_text, "OBLIVIO_SUBJECT_HMAC_KEY"))

    @property
    def active_kek_version(self) -> int:
        return max(self._keks)

    def kek(self, version: int) -> bytes:
        try:
            return self._keks[version]
        except KeyError as e:
            raise KeyUnavailableError(f"KEK version {version} is not available") from e

    def subject_hmac_key(self) -> bytes:
        return self._hmac_key


def move_keyring(source: Path, target: Path, store: Mapping[str, str]) -> bool:
    """Move the keyring file ``source`` to ``target``, recording ``store`` in it.

    The copy is written (0600, fsynced) before the original is removed, and it
    never replaces a file at ``target``: if one is there already (another
    process moved the keyring first, or an earlier move was interrupted after
    the copy), the original is removed only if both hold the same keys, and a
    conflict is refused.  False when ``source`` had gone already.
    """
    try:
        document = json.loads(source.read_text())
    except FileNotFoundError:
        return False
    document.setdefault("store", dict(store))
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    _write_private(target, json.dumps(document, indent=2).encode(), replace=False)
    if not _same_keys(KeyringFile(source), KeyringFile(target)):
        raise KeyUnavailableError(
            f"two different keyrings for one store: {source} and {target}; keep the one "
            "that decrypts the store's data (the other was made for an empty store) and "
            "remove the other"
        )
    for leftover in (source, source.with_name(source.name + ".lock")):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()
    return True


def _same_keys(one: KeyringFile, other: KeyringFile) -> bool:
    def material(keyring: KeyringFile) -> tuple[bytes, list[tuple[int, bytes | None]]]:
        return keyring.subject_hmac_key(), [(r.version, r.key) for r in keyring.kek_records()]

    return material(one) == material(other)
