"""Issuer keys, the keyring file and the published JWKS."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from certificates import (
    IssuerKey,
    IssuerKeyring,
    KeyringError,
    b64url_decode,
    b64url_encode,
    jwk_thumbprint,
    key_id,
)

# RFC 8037 Appendix A.1-A.3: an Ed25519 key and its RFC 7638 thumbprint.
RFC8037_D = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC8037_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC8037_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"

T0 = datetime(2025, 1, 1, tzinfo=UTC)


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(hours=1)
        return self.now


def _rfc8037_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(b64url_decode(RFC8037_D))


def _private_text(key: IssuerKey) -> str:
    return b64url_encode(
        key.private_key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    )


def test_kid_is_the_rfc7638_thumbprint() -> None:
    private_key = _rfc8037_key()
    assert jwk_thumbprint({"kty": "OKP", "crv": "Ed25519", "x": RFC8037_X}) == RFC8037_THUMBPRINT
    assert key_id(private_key.public_key()) == RFC8037_THUMBPRINT
    key = IssuerKey(RFC8037_THUMBPRINT, private_key, T0)
    assert key.public_jwk() == {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": RFC8037_X,
        "kid": RFC8037_THUMBPRINT,
        "use": "sig",
    }


def test_thumbprint_hashes_only_required_members_in_order() -> None:
    jwk = {"x": RFC8037_X, "kid": "ignored", "kty": "OKP", "use": "sig", "crv": "Ed25519"}
    members = '{"crv":"Ed25519","kty":"OKP","x":"' + RFC8037_X + '"}'
    expected = b64url_encode(hashlib.sha256(members.encode()).digest())
    assert jwk_thumbprint(jwk) == expected == RFC8037_THUMBPRINT


def test_issuer_key_refuses_a_kid_that_is_not_its_thumbprint() -> None:
    with pytest.raises(KeyringError, match="thumbprint"):
        IssuerKey("not-the-kid", _rfc8037_key(), T0)


def test_issuer_key_refuses_naive_times() -> None:
    with pytest.raises(KeyringError, match="timezone"):
        IssuerKey(RFC8037_THUMBPRINT, _rfc8037_key(), datetime(2025, 1, 1))


def test_generate_makes_one_active_key() -> None:
    keyring = IssuerKeyring.generate(clock=_Clock())
    (key,) = keyring.keys
    assert keyring.active is key
    assert key.is_active
    assert key.created_at == T0 + timedelta(hours=1)


def test_rotate_retires_but_keeps_the_old_key() -> None:
    clock = _Clock()
    keyring = IssuerKeyring.generate(clock=clock)
    old = keyring.active
    new = keyring.rotate()
    assert keyring.active == new != old
    retired = keyring.get(old.kid)
    assert retired.retired_at == new.created_at == T0 + timedelta(hours=2)
    assert not retired.is_active
    assert [key.kid for key in keyring.keys] == [old.kid, new.kid]


def test_get_unknown_kid() -> None:
    with pytest.raises(KeyringError, match="no issuer key"):
        IssuerKeyring.generate().get("nope")


def test_jwks_lists_every_key_without_private_material() -> None:
    keyring = IssuerKeyring.generate()
    keyring.rotate()
    keyring.rotate()
    jwks = keyring.jwks()
    assert [entry["kid"] for entry in jwks["keys"]] == [key.kid for key in keyring.keys]
    text = json.dumps(jwks)
    for entry, key in zip(jwks["keys"], keyring.keys, strict=True):
        assert set(entry) == {"kty", "crv", "x", "kid", "use"}
        assert entry["kid"] == jwk_thumbprint(entry)
        assert _private_text(key) not in text


def test_open_creates_a_0600_file_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "issuer-keys.json"
    first = IssuerKeyring.open(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = IssuerKeyring.open(path)
    assert [key.kid for key in again.keys] == [first.active.kid]
    assert sorted(os.listdir(tmp_path)) == ["issuer-keys.json"]


def test_open_keeps_a_keyring_written_by_someone_else(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    winner = IssuerKeyring.generate()
    winner.save(path)
    assert IssuerKeyring.open(path).active.kid == winner.active.kid


def test_rotation_is_persisted_with_private_keys_0600(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    keyring = IssuerKeyring.open(path)
    keyring.rotate()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    reloaded = IssuerKeyring.load(path)
    assert [key.kid for key in reloaded.keys] == [key.kid for key in keyring.keys]
    assert reloaded.active.kid == keyring.active.kid
    assert [_private_text(key) for key in reloaded.keys] == [_private_text(k) for k in keyring.keys]
    assert sorted(os.listdir(tmp_path)) == ["keys.json"]


def test_load_refuses_a_file_others_can_read(tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    IssuerKeyring.generate().save(path)
    path.chmod(0o644)
    with pytest.raises(KeyringError, match="chmod 600"):
        IssuerKeyring.load(path)


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KeyringError, match="cannot read"):
        IssuerKeyring.load(tmp_path / "absent.json")


def test_save_without_a_path() -> None:
    with pytest.raises(KeyringError, match="no path"):
        IssuerKeyring.generate().save()


def test_from_env_round_trip() -> None:
    keyring = IssuerKeyring.generate()
    keyring.rotate()
    restored = IssuerKeyring.from_env(keyring.to_json())
    assert restored.jwks() == keyring.jwks()
    assert restored.active.kid == keyring.active.kid
    assert restored.keys[0].retired_at == keyring.keys[0].retired_at
    assert restored.path is None


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"version": 2, "keys": []}',
        '{"version": 1}',
        '{"version": 1, "keys": []}',
        '{"version": 1, "keys": ["x"]}',
        '{"version": 1, "keys": [{"kid": "a"}]}',
        '{"version": 1, "keys": [{"kid": "a", "d": "!!", "created_at": "2025-01-01T00:00:00Z"}]}',
    ],
)
def test_from_env_refuses_malformed_keyrings(text: str) -> None:
    with pytest.raises(KeyringError):
        IssuerKeyring.from_env(text)


def test_keyring_needs_exactly_one_active_key() -> None:
    active = IssuerKey.generate(T0)
    other = IssuerKey.generate(T0)
    with pytest.raises(KeyringError, match="exactly one active"):
        IssuerKeyring([active, other])
    with pytest.raises(KeyringError, match="exactly one active"):
        IssuerKeyring([])
    with pytest.raises(KeyringError, match="twice"):
        IssuerKeyring([active, IssuerKey(active.kid, active.private_key, T0, T0)])


def test_tampered_kid_in_file_is_refused() -> None:
    document = json.loads(IssuerKeyring.generate().to_json())
    document["keys"][0]["kid"] = RFC8037_THUMBPRINT
    with pytest.raises(KeyringError, match="thumbprint"):
        IssuerKeyring.from_json(json.dumps(document))
