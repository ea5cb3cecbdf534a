"""Independent verification with jwcrypto, in both directions."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jwcrypto import jwk, jws

from certificates import (
    CERTIFICATE_TYP,
    CertificateVerificationError,
    IssuerKeyring,
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
