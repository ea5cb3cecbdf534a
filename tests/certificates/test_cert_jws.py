"""Signing and verifying certificates, and every named reason for refusing one."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from certificates import (
    CERTIFICATE_TYP,
    VERIFICATION_REASONS,
    CanonicalizationError,
    CertificateVerificationError,
    IssuerKey,
    IssuerKeyring,
    RetiredKeyError,
    b64url_decode,
    b64url_encode,
    canonicalize,
    sign,
    verify,
)


def _signed_by_hand(key: IssuerKey, header: bytes, payload: bytes) -> dict[str, str]:
    """A JWS over arbitrary header and payload bytes, correctly signed by ``key``."""
    protected, body = b64url_encode(header), b64url_encode(payload)
    signature = key.private_key.sign(f"{protected}.{body}".encode())
    return {"protected": protected, "payload": body, "signature": b64url_encode(signature)}


def _header(key: IssuerKey, **changes: Any) -> bytes:
    header = {"alg": "EdDSA", "kid": key.kid, "typ": CERTIFICATE_TYP, **changes}
    return canonicalize({name: value for name, value in header.items() if value is not None})


def _reason(jws: Any, jwks: Any, **options: Any) -> str:
    with pytest.raises(CertificateVerificationError) as caught:
        verify(jws, jwks, **options)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.reason in VERIFICATION_REASONS
    assert error.reason in str(error)
    return error.reason


def test_round_trip(keyring: IssuerKeyring, certificate_payload: dict[str, Any]) -> None:
    certificate = sign(certificate_payload, keyring.active)
    verified = verify(certificate, keyring.jwks())
    assert verified.payload == certificate_payload
    assert verified.kid == keyring.active.kid
    assert verified.header == {"alg": "Ed25519", "kid": keyring.active.kid, "typ": CERTIFICATE_TYP}


def test_serialization_shape(keyring: IssuerKeyring, certificate_payload: dict[str, Any]) -> None:
    certificate = sign(certificate_payload, keyring.active)
    assert set(certificate) == {"payload", "protected", "signature"}
    assert not any("=" in part for part in certificate.values())
    assert b64url_decode(certificate["payload"]) == canonicalize(certificate_payload)
    assert b64url_decode(certificate["protected"]) == (
        b'{"alg":"Ed25519","kid":"'
        + keyring.active.kid.encode()
        + b'","typ":"'
        + CERTIFICATE_TYP.encode()
        + b'"}'
    )
    assert len(b64url_decode(certificate["signature"])) == 64


def test_signing_is_deterministic(keyring: IssuerKeyring) -> None:
    # Ed25519 is deterministic and the payload canonical, so key order cannot matter.
    assert sign({"a": 1, "b": 2}, keyring.active) == sign({"b": 2, "a": 1}, keyring.active)


def test_verify_accepts_a_json_string(keyring: IssuerKeyring) -> None:
    certificate = sign({"n": 1}, keyring.active)
    assert verify(json.dumps(certificate, indent=2), keyring.jwks()).payload == {"n": 1}


def test_verify_accepts_the_general_form_with_one_signature(keyring: IssuerKeyring) -> None:
    flat = sign({"n": 1}, keyring.active)
    entry = {"protected": flat["protected"], "signature": flat["signature"]}
    general: dict[str, Any] = {"payload": flat["payload"], "signatures": [entry]}
    assert verify(general, keyring.jwks()).payload == {"n": 1}
    two = {**general, "signatures": [entry, entry]}
    assert _reason(two, keyring.jwks()) == "malformed_serialization"
    mixed = {**general, "protected": flat["protected"]}
    assert _reason(mixed, keyring.jwks()) == "malformed_serialization"


def test_retired_key_still_verifies_after_rotation(keyring: IssuerKeyring) -> None:
    old_certificate = sign({"n": 1}, keyring.active)
    old_kid = keyring.active.kid
    keyring.rotate()
    new_certificate = sign({"n": 2}, keyring.active)
    jwks = keyring.jwks()
    assert verify(old_certificate, jwks).kid == old_kid
    assert verify(new_certificate, jwks).kid == keyring.active.kid != old_kid


def test_retired_key_never_signs(keyring: IssuerKeyring) -> None:
    retired = keyring.active
    keyring.rotate()
    with pytest.raises(RetiredKeyError, match="retired"):
        sign({"n": 1}, keyring.get(retired.kid))


@pytest.mark.parametrize("payload", [[1, 2], "text", {"x": math.nan}, {"n": 2**60}, {1: "a"}])
def test_sign_refuses_payloads_without_canonical_object_form(
    keyring: IssuerKeyring, payload: Any
) -> None:
    with pytest.raises(CanonicalizationError):
        sign(payload, keyring.active)


def test_custom_typ(keyring: IssuerKeyring) -> None:
    manifest = sign({"n": 1}, keyring.active, typ="oblivio-audit-manifest+jws")
    assert verify(manifest, keyring.jwks(), typ="oblivio-audit-manifest+jws").payload == {"n": 1}
    assert verify(manifest, keyring.jwks(), typ=None).kid == keyring.active.kid
    # A manifest must not pass for a forget certificate, or vice versa.
    assert _reason(manifest, keyring.jwks()) == "bad_header"


@pytest.mark.parametrize(
    "alg", ["none", "None", "HS256", "ES256", "RS256", "Ed448", "ed25519", "eddsa", "", None]
)
def test_any_alg_but_ed25519_or_eddsa_is_refused(keyring: IssuerKeyring, alg: str | None) -> None:
    header = _header(keyring.active, alg=alg)
    jws = _signed_by_hand(keyring.active, header, canonicalize({"n": 1}))
    expected = "bad_header" if alg is None else "unsupported_alg"
    assert _reason(jws, keyring.jwks()) == expected


@pytest.mark.parametrize("alg", ["Ed25519", "EdDSA"])
def test_ed25519_and_the_deprecated_eddsa_both_verify(keyring: IssuerKeyring, alg: str) -> None:
    header = _header(keyring.active, alg=alg)
    jws = _signed_by_hand(keyring.active, header, canonicalize({"n": 1}))
    assert verify(jws, keyring.jwks()).header["alg"] == alg


def test_alg_none_with_empty_signature(keyring: IssuerKeyring) -> None:
    jws = _signed_by_hand(keyring.active, _header(keyring.active, alg="none"), b'{"n":1}')
    jws["signature"] = ""
    assert _reason(jws, keyring.jwks()) == "unsupported_alg"


def test_missing_or_unknown_kid(keyring: IssuerKeyring) -> None:
    payload = canonicalize({"n": 1})
    no_kid = _signed_by_hand(
        keyring.active, canonicalize({"alg": "EdDSA", "typ": CERTIFICATE_TYP}), payload
    )
    assert _reason(no_kid, keyring.jwks()) == "bad_header"
    numeric_kid = _signed_by_hand(keyring.active, _header(keyring.active, kid=7), payload)
    assert _reason(numeric_kid, keyring.jwks()) == "bad_header"
    other = IssuerKeyring.generate()
    assert _reason(sign({"n": 1}, keyring.active), other.jwks()) == "unknown_kid"


def test_signature_from_another_key_under_our_kid(keyring: IssuerKeyring) -> None:
    impostor = IssuerKeyring.generate().active
    jws = _signed_by_hand(impostor, _header(keyring.active), canonicalize({"n": 1}))
    assert _reason(jws, keyring.jwks()) == "bad_signature"


@pytest.mark.parametrize(
    "extra", [{"crit": ["b64"]}, {"b64": False}, {"jku": "https://evil.example/jwks"}]
)
def test_unknown_header_parameters_are_refused(
    keyring: IssuerKeyring, extra: dict[str, Any]
) -> None:
    header = canonicalize(
        {"alg": "EdDSA", "kid": keyring.active.kid, "typ": CERTIFICATE_TYP, **extra}
    )
    jws = _signed_by_hand(keyring.active, header, canonicalize({"n": 1}))
    assert _reason(jws, keyring.jwks()) == "bad_header"


def test_unprotected_header_is_refused(keyring: IssuerKeyring) -> None:
    certificate = {**sign({"n": 1}, keyring.active), "header": {"kid": "x"}}
    assert _reason(certificate, keyring.jwks()) == "malformed_serialization"


@pytest.mark.parametrize(
    "header",
    [
        b'{"kid":"K","alg":"EdDSA","typ":"T"}',
        b'{"alg": "EdDSA","kid":"K","typ":"T"}',
        b'{"alg":"EdDSA","kid":"K","typ":"T"}\n',
        b'{"alg":"EdDSA","alg":"EdDSA","kid":"K","typ":"T"}',
        b'{"alg":"\\u0045dDSA","kid":"K","typ":"T"}',
        b'["alg","EdDSA"]',
        b"not json",
        b"\xff",
    ],
)
def test_header_must_be_a_canonical_object(keyring: IssuerKeyring, header: bytes) -> None:
    header = header.replace(b'"K"', json.dumps(keyring.active.kid).encode())
    header = header.replace(b'"T"', json.dumps(CERTIFICATE_TYP).encode())
    jws = _signed_by_hand(keyring.active, header, canonicalize({"n": 1}))
    assert _reason(jws, keyring.jwks()) == "header_not_canonical"


@pytest.mark.parametrize(
    "payload",
    [
        b'{"b":1,"a":2}',
        b'{"a": 1}',
        b'{"a":1.0}',
        b'{"a":1E3}',
        b'{"a":"\\u0041"}',
        b'{"a":1,"a":1}',
        b'{"a":NaN}',
        b'{"a":9007199254740993}',
        b"[1,2]",
        b'"text"',
        b"",
        b"\xef\xbb\xbf{}",
        b'{"a":"\xff"}',
    ],
)
def test_payload_must_be_a_canonical_object(keyring: IssuerKeyring, payload: bytes) -> None:
    jws = _signed_by_hand(keyring.active, _header(keyring.active), payload)
    assert _reason(jws, keyring.jwks()) == "payload_not_canonical"


def test_large_doubles_survive_verification(keyring: IssuerKeyring) -> None:
    payload = {"big": 1e20, "edge": 9007199254740992.0, "small": 5e-324}
    assert verify(sign(payload, keyring.active), keyring.jwks()).payload == payload


@pytest.mark.parametrize(
    "jws",
    [
        "not json",
        "[]",
        '{"payload":"e30","protected":"e30","signature":"e30","payload":"e30"}',
        {"payload": "e30", "protected": "e30"},
        {"payload": 1, "protected": "e30", "signature": "e30"},
        {"payload": "e30", "signatures": "x"},
        {"payload": "e30", "signatures": ["x"]},
        "[" * 100_000,
        42,
    ],
)
def test_malformed_serializations(keyring: IssuerKeyring, jws: Any) -> None:
    assert _reason(jws, keyring.jwks()) == "malformed_serialization"


@pytest.mark.parametrize("part", ["protected", "payload", "signature"])
@pytest.mark.parametrize("bad", ["e30=", "e3+0", "e3/0", "e 30", "e", "é"])
def test_bad_base64url(keyring: IssuerKeyring, part: str, bad: str) -> None:
    certificate = {**sign({"n": 1}, keyring.active), part: bad}
    assert _reason(certificate, keyring.jwks()) == "bad_base64url"


def test_jwks_problems(keyring: IssuerKeyring) -> None:
    certificate = sign({"n": 1}, keyring.active)
    entry = keyring.jwks()["keys"][0]
    assert _reason(certificate, {}) == "bad_jwks"
    assert _reason(certificate, {"keys": "x"}) == "bad_jwks"
    assert _reason(certificate, {"keys": [entry, entry]}) == "bad_jwks"
    assert _reason(certificate, {"keys": [{"kty": "OKP"}]}) == "bad_jwks"


@pytest.mark.parametrize(
    "changes",
    [
        {"kty": "EC"},
        {"crv": "X25519"},
        {"crv": "Ed448"},
        {"alg": "ES256"},
        {"use": "enc"},
        {"x": "AAAA"},
        {"x": None},
    ],
)
def test_key_must_be_an_ed25519_signing_key(
    keyring: IssuerKeyring, changes: dict[str, Any]
) -> None:
    certificate = sign({"n": 1}, keyring.active)
    entry = {**keyring.jwks()["keys"][0], **changes}
    assert _reason(certificate, {"keys": [entry]}) == "bad_key"


def test_jwks_entry_whose_kid_names_another_key(keyring: IssuerKeyring) -> None:
    certificate = sign({"n": 1}, keyring.active)
    other = IssuerKeyring.generate().jwks()["keys"][0]
    swapped = {**other, "kid": keyring.active.kid}
    assert _reason(certificate, {"keys": [swapped]}) == "bad_key"
