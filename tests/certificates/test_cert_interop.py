"""Independent verification with jwcrypto (both directions) and joserfc.

Certificates are issued as ``alg: Ed25519`` (RFC 9864); those issued before that change
carry ``alg: EdDSA`` and a JWKS whose keys named ``"alg": "EdDSA"``.  Two independent JOSE
libraries must verify both against the JWKS we publish now.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from joserfc import jws as joserfc_jws
from joserfc.errors import BadSignatureError, SecurityWarning
from joserfc.jwk import KeySet
from jwcrypto import jwk, jws

from certificates import (
    CERTIFICATE_TYP,
    CertificateVerificationError,
    IssuerKey,
    IssuerKeyring,
    b64url_encode,
    canonicalize,
    sign,
    verify,
)


def _jwcrypto_verify(certificate: dict[str, str], entry: dict[str, Any]) -> bytes:
    token = jws.JWS()
    token.deserialize(json.dumps(certificate))
    token.verify(jwk.JWK(**entry))
    payload: bytes = token.payload
    return payload


def test_jwcrypto_verifies_our_certificate(
    keyring: IssuerKeyring, certificate_payload: dict[str, Any]
) -> None:
    certificate = sign(certificate_payload, keyring.active)
    (entry,) = keyring.jwks()["keys"]
    assert json.loads(_jwcrypto_verify(certificate, entry)) == certificate_payload


def test_jwcrypto_verifies_with_a_retired_key(keyring: IssuerKeyring) -> None:
    certificate = sign({"n": 1}, keyring.active)
    keyring.rotate()
    retired_entry = keyring.jwks()["keys"][0]
    assert json.loads(_jwcrypto_verify(certificate, retired_entry)) == {"n": 1}


def test_jwcrypto_refuses_our_certificate_under_another_key(keyring: IssuerKeyring) -> None:
    certificate = sign({"n": 1}, keyring.active)
    (stranger,) = IssuerKeyring.generate().jwks()["keys"]
    with pytest.raises(jws.InvalidJWSSignature):
        _jwcrypto_verify(certificate, stranger)


def test_jwcrypto_agrees_on_the_thumbprint(keyring: IssuerKeyring) -> None:
    (entry,) = keyring.jwks()["keys"]
    assert jwk.JWK(**entry).thumbprint() == keyring.active.kid
    assert "d" not in jwk.JWK(**entry).export_public(as_dict=True)


def _jwcrypto_sign(keyring: IssuerKeyring, payload: bytes, protected: str) -> dict[str, Any]:
    key = jwk.JWK.from_pyca(keyring.active.private_key)
    token = jws.JWS(payload)
    token.add_signature(key, None, protected)
    serialized: dict[str, Any] = json.loads(token.serialize())
    return serialized


def test_we_verify_a_jwcrypto_certificate(keyring: IssuerKeyring) -> None:
    payload = {"certificate_id": "c-9", "namespace": "ä/😀", "events_erased": 2}
    header = {"alg": "EdDSA", "kid": keyring.active.kid, "typ": CERTIFICATE_TYP}
    foreign = _jwcrypto_sign(keyring, canonicalize(payload), canonicalize(header).decode())
    verified = verify(foreign, keyring.jwks())
    assert verified.payload == payload
    assert verified.kid == keyring.active.kid


def test_we_refuse_a_jwcrypto_certificate_with_a_lenient_encoding(keyring: IssuerKeyring) -> None:
    # jwcrypto would accept these; our verifier insists on canonical bytes.
    header = {"alg": "EdDSA", "kid": keyring.active.kid, "typ": CERTIFICATE_TYP}
    spaced_header = _jwcrypto_sign(keyring, b'{"n":1}', json.dumps(header))
    spaced_payload = _jwcrypto_sign(keyring, b'{"n": 1}', canonicalize(header).decode())
    for foreign, reason in (
        (spaced_header, "header_not_canonical"),
        (spaced_payload, "payload_not_canonical"),
    ):
        with pytest.raises(CertificateVerificationError) as caught:
            verify(foreign, keyring.jwks())
        assert caught.value.reason == reason


def _old_certificate(key: IssuerKey, payload: dict[str, Any]) -> dict[str, str]:
    """A certificate as versions before RFC 9864 signed it: ``alg: EdDSA``."""
    header = canonicalize({"alg": "EdDSA", "kid": key.kid, "typ": CERTIFICATE_TYP})
    protected, body = b64url_encode(header), b64url_encode(canonicalize(payload))
    signature = key.private_key.sign(f"{protected}.{body}".encode())
    return {"payload": body, "protected": protected, "signature": b64url_encode(signature)}


def _joserfc_verify(certificate: dict[str, str], jwks: dict[str, Any], alg: str) -> bytes:
    # algorithms= names exactly the one expected, so joserfc cannot be talked into another.
    # joserfc warns about the deprecated name, and only about it.
    expected = pytest.warns(SecurityWarning) if alg == "EdDSA" else contextlib.nullcontext()
    with expected:
        verified = joserfc_jws.deserialize_json(
            certificate, KeySet.import_key_set(jwks), algorithms=[alg]
        )
    assert verified.headers()["alg"] == alg
    payload: bytes = verified.payload
    return payload


def test_new_certificates_name_ed25519(keyring: IssuerKeyring) -> None:
    certificate = sign({"n": 1}, keyring.active)
    assert verify(certificate, keyring.jwks()).header["alg"] == "Ed25519"
    # The published key names no alg: a key that said "EdDSA" would fail new
    # certificates in joserfc, one that said "Ed25519" would fail old ones.
    assert all("alg" not in entry for entry in keyring.jwks()["keys"])


@pytest.mark.parametrize("era", ["new", "old"])
def test_two_jose_libraries_verify_old_and_new_certificates(
    keyring: IssuerKeyring, certificate_payload: dict[str, Any], era: str
) -> None:
    if era == "new":
        certificate, alg = sign(certificate_payload, keyring.active), "Ed25519"
    else:
        certificate, alg = _old_certificate(keyring.active, certificate_payload), "EdDSA"
    jwks = keyring.jwks()
    assert json.loads(_joserfc_verify(certificate, jwks, alg)) == certificate_payload
    assert json.loads(_jwcrypto_verify(certificate, jwks["keys"][0])) == certificate_payload
    assert verify(certificate, jwks).payload == certificate_payload


def test_an_old_jwks_still_verifies_old_certificates(keyring: IssuerKeyring) -> None:
    # JWKS saved from an older version carry "alg": "EdDSA" in each key.
    old_jwks = {"keys": [{**entry, "alg": "EdDSA"} for entry in keyring.jwks()["keys"]]}
    certificate = _old_certificate(keyring.active, {"n": 2})
    assert verify(certificate, old_jwks).payload == {"n": 2}
    assert json.loads(_joserfc_verify(certificate, old_jwks, "EdDSA")) == {"n": 2}
    assert verify(sign({"n": 3}, keyring.active), old_jwks).payload == {"n": 3}


def test_joserfc_refuses_a_tampered_certificate(keyring: IssuerKeyring) -> None:
    certificate = sign({"n": 1}, keyring.active)
    tampered = {**certificate, "payload": b64url_encode(canonicalize({"n": 2}))}
    with pytest.raises(BadSignatureError):
        _joserfc_verify(tampered, keyring.jwks(), "Ed25519")
