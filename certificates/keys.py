"""Ed25519 issuer keys and the keyring that keeps them, active and retired.

A keyring holds exactly one active key, which signs, and any number of retired keys, which
never sign again but stay in the keyring so their public halves remain in the published
JWKS: certificates they signed must verify forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from certificates.base64url import b64url_decode, b64url_encode
from certificates.errors import KeyringError
from certificates.jwk import jwk_thumbprint, public_jwk

Clock = Callable[[], datetime]

KEYRING_FORMAT_VERSION = 1
KEYRING_FILE_MODE = 0o600


def utc_now() -> datetime:
    """Return the current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def key_id(public_key: Ed25519PublicKey) -> str:
    """Return the kid of a public key: its RFC 7638 JWK thumbprint."""
    return jwk_thumbprint(public_jwk(public_key))


@dataclass(frozen=True)
class IssuerKey:
    """One Ed25519 issuer key; ``retired_at`` is ``None`` while it is the active key."""

    kid: str
    private_key: Ed25519PrivateKey = field(repr=False)
    created_at: datetime
    retired_at: datetime | None = None

    def __post_init__(self) -> None:
        # A kid that does not name this key would make every certificate it signs point
        # verifiers at the wrong public key (or at nothing).
        if self.kid != key_id(self.private_key.public_key()):
            raise KeyringError("kid is not the thumbprint of the key")
        for moment in (self.created_at, self.retired_at):
            if moment is not None and moment.utcoffset() is None:
                raise KeyringError("issuer key times must be timezone-aware")

    @classmethod
    def generate(cls, created_at: datetime) -> IssuerKey:
        """Create a fresh active key."""
        private_key = Ed25519PrivateKey.generate()
        return cls(key_id(private_key.public_key()), private_key, created_at)

    @property
    def public_key(self) -> Ed25519PublicKey:
        """The public half, safe to publish."""
        return self.private_key.public_key()

    @property
    def is_active(self) -> bool:
        """Whether this key may still sign."""
        return self.retired_at is None

    def public_jwk(self) -> dict[str, str]:
        """Return the JWKS entry for this key (RFC 8037 OKP, no private member ``d``).

        The optional ``alg`` member is left out: the same key verifies certificates signed
        as ``Ed25519`` and older ones signed as ``EdDSA``, and a JOSE library that finds an
        ``alg`` in the key refuses a signature under the other name.
        """
        return {**public_jwk(self.public_key), "kid": self.kid, "use": "sig"}


class IssuerKeyring:
    """The issuer's Ed25519 keys: one active signer plus every retired key.

    A keyring opened from a file (:meth:`open`, :meth:`load`) remembers its path and writes
    itself back on :meth:`rotate`, so a new key is on disk before it can sign anything.
    Rotation is an operator action: run it in one process at a time.
    """

    def __init__(
        self, keys: Iterable[IssuerKey], *, path: Path | None = None, clock: Clock = utc_now
    ) -> None:
        self._keys = list(keys)
        self.path = path
        self._clock = clock
        _check_keys(self._keys)

    @classmethod
    def generate(cls, *, clock: Clock = utc_now) -> IssuerKeyring:
        """Return a new in-memory keyring holding one fresh active key."""
        return cls([IssuerKey.generate(clock())], clock=clock)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, clock: Clock = utc_now) -> IssuerKeyring:
        """Load the keyring at ``path``, creating it with a fresh key on first use."""
        target = Path(path)
        if not target.exists():
            keyring = cls.generate(clock=clock)
            # Two processes starting together must not each generate and keep a different
            # key; only the first file wins and the loser loads it.
            with contextlib.suppress(FileExistsError):
                _write_file(target, keyring.to_json(), replace_existing=False)
        return cls.load(target, clock=clock)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, clock: Clock = utc_now) -> IssuerKeyring:
        """Load a keyring file; refuse one that group or others can access."""
        target = Path(path)
        try:
            mode = target.stat().st_mode
            text = target.read_text(encoding="utf-8")
        except OSError as exc:
            raise KeyringError(f"cannot read keyring {target}: {exc}") from exc
        if os.name == "posix" and stat.S_IMODE(mode) & 0o077:
            raise KeyringError(f"keyring {target} is accessible to other users; chmod 600 it")
        keyring = cls.from_json(text, clock=clock)
        keyring.path = target
        return keyring

    @classmethod
    def from_env(cls, value: str, *, clock: Clock = utc_now) -> IssuerKeyring:
        """Load a keyring from a JSON string, e.g. an environment variable in a container."""
        return cls.from_json(value, clock=clock)

    @classmethod
    def from_json(cls, text: str, *, clock: Clock = utc_now) -> IssuerKeyring:
        """Parse the keyring JSON written by :meth:`to_json`."""
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise KeyringError("keyring is not JSON") from exc
        if not isinstance(document, dict) or document.get("version") != KEYRING_FORMAT_VERSION:
            raise KeyringError(f"keyring is not a version {KEYRING_FORMAT_VERSION} object")
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise KeyringError("keyring has no 'keys' list")
        return cls([_key_from_dict(entry) for entry in entries], clock=clock)

    def to_json(self) -> str:
        """Serialise the keyring, private keys included: treat the result as a secret."""
        document = {
            "version": KEYRING_FORMAT_VERSION,
            "keys": [_key_to_dict(key) for key in self._keys],
        }
        return json.dumps(document, indent=2) + "\n"

    def save(self, path: str | os.PathLike[str] | None = None) -> None:
        """Write the keyring (mode 0600, atomic replace) to ``path`` or its own path."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise KeyringError("keyring has no path to save to")
        _write_file(target, self.to_json(), replace_existing=True)
        self.path = target

    @property
    def active(self) -> IssuerKey:
        """The one key allowed to sign."""
        return next(key for key in self._keys if key.is_active)

    @property
    def keys(self) -> tuple[IssuerKey, ...]:
        """Every key, oldest first, active and retired."""
        return tuple(self._keys)

    def get(self, kid: str) -> IssuerKey:
        """Return the key named ``kid``; raise :class:`KeyringError` if there is none."""
        for key in self._keys:
            if key.kid == kid:
                return key
        raise KeyringError(f"no issuer key {kid!r}")

    def rotate(self) -> IssuerKey:
        """Retire the active key, make a fresh one active, save if file-backed, return it."""
        now = self._clock()
        new_key = IssuerKey.generate(now)
        keys = [key if not key.is_active else replace(key, retired_at=now) for key in self._keys]
        keys.append(new_key)
        _check_keys(keys)
        self._keys = keys
        if self.path is not None:
            self.save()
        return new_key

    def jwks(self) -> dict[str, Any]:
        """Return the public JWKS of every key, retired ones included, without private parts."""
        return {"keys": [key.public_jwk() for key in self._keys]}


def _check_keys(keys: list[IssuerKey]) -> None:
    if sum(key.is_active for key in keys) != 1:
        raise KeyringError("a keyring needs exactly one active key")
    if len({key.kid for key in keys}) != len(keys):
        raise KeyringError("a keyring lists the same key twice")


def _key_to_dict(key: IssuerKey) -> dict[str, str | None]:
    raw = key.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return {
        "kid": key.kid,
        "d": b64url_encode(raw),
        "created_at": key.created_at.isoformat(),
        "retired_at": key.retired_at.isoformat() if key.retired_at else None,
    }


def _key_from_dict(entry: object) -> IssuerKey:
    if not isinstance(entry, Mapping):
        raise KeyringError("keyring entry is not an object")
    try:
        private_key = Ed25519PrivateKey.from_private_bytes(b64url_decode(entry["d"]))
        retired = entry.get("retired_at")
        return IssuerKey(
            kid=entry["kid"],
            private_key=private_key,
            created_at=datetime.fromisoformat(entry["created_at"]),
            retired_at=datetime.fromisoformat(retired) if retired is not None else None,
        )
    except KeyringError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise KeyringError(f"malformed keyring entry: {exc!r}") from exc


def _write_file(target: Path, text: str, *, replace_existing: bool) -> None:
    """Write ``text`` to ``target`` with mode 0600 via a temporary file and a rename."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
    # O_EXCL refuses a pre-planted file or symlink at the temporary name, and the mode is
    # set at creation, so the secret is never readable by others, not even briefly.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(temporary, flags, KEYRING_FILE_MODE)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if replace_existing:
            os.replace(temporary, target)
        else:
            os.link(temporary, target)  # fails with FileExistsError instead of replacing
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    _fsync_directory(target.parent)


def _fsync_directory(directory: Path) -> None:
    if os.name != "posix":
        return
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
