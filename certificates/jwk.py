"""RFC 8037 OKP/Ed25519 public JWKs, RFC 7638 thumbprints and JWKS parsing."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from certificates.base64url import b64url_decode, b64url_encode
from certificates.canonical import canonicalize
from certificates.errors import JWKError

ED25519_KEY_BYTES = 32
#: The ``alg`` a published Ed25519 key may name: RFC 9864's ``Ed25519``, or RFC 8037's
#: ``EdDSA`` (deprecated, but JWKS published by older versions carry it).
SIGNATURE_ALGORITHMS = frozenset({"Ed25519", "EdDSA"})


def public_jwk(public_key: Ed25519PublicKey) -> dict[str, str]:
    """Return the required RFC 8037 members ``{"crv", "kty", "x"}`` of ``public_key``."""
    raw = public_key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return {"crv": "Ed25519", "kty": "OKP", "x": b64url_encode(raw)}


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """Return the RFC 7638 SHA-256 thumbprint of an OKP JWK, base64url encoded.

    Only the required members ``crv``, ``kty`` and ``x`` are hashed, in canonical JSON.
    """
    try:
        required = {name: jwk[name] for name in ("crv", "kty", "x")}
    except KeyError as exc:
        raise JWKError(f"OKP JWK lacks the {exc.args[0]!r} member") from exc
    return b64url_encode(hashlib.sha256(canonicalize(required)).digest())


def public_key_from_jwk(jwk: Mapping[str, Any]) -> Ed25519PublicKey:
    """Return the Ed25519 public key of an RFC 8037 JWK.

    Raises :class:`JWKError` unless ``kty`` is ``OKP``, ``crv`` is ``Ed25519``, ``x`` is
    32 bytes of base64url, ``alg`` (if present) is ``Ed25519`` or ``EdDSA``, ``use`` (if
    present) is ``sig`` and ``kid`` (if present) is the key's RFC 7638 thumbprint.
    """
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
        raise JWKError(f"key is kty={jwk.get('kty')!r} crv={jwk.get('crv')!r}, not OKP/Ed25519")
    if jwk.get("alg", "Ed25519") not in SIGNATURE_ALGORITHMS or jwk.get("use", "sig") != "sig":
        raise JWKError("key is not published for Ed25519 signatures")
    raw = _decode_x(jwk.get("x"))
    # A kid that is not the thumbprint of x would let a JWKS bind a certificate's kid to a
    # different key than the one that signed it; reject the mismatch instead of trusting it.
    if "kid" in jwk and jwk["kid"] != jwk_thumbprint(jwk):
        raise JWKError("kid is not the RFC 7638 thumbprint of the key")
    return Ed25519PublicKey.from_public_bytes(raw)


def index_jwks(jwks: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Return the entries of a JWKS by ``kid`` without judging their key type.

    Raises :class:`JWKError` if ``jwks`` has no ``keys`` list, an entry is not an object or
    has no string ``kid``, or two entries share a ``kid`` (which one would be meant?).
    """
    keys = jwks.get("keys") if isinstance(jwks, Mapping) else None
    if not isinstance(keys, list):
        raise JWKError("JWKS has no 'keys' list")
    indexed: dict[str, Mapping[str, Any]] = {}
    for entry in keys:
        kid = entry.get("kid") if isinstance(entry, Mapping) else None
        if not isinstance(kid, str):
            raise JWKError("JWKS entry is not an object with a string 'kid'")
        if kid in indexed:
            raise JWKError(f"JWKS lists kid {kid!r} twice")
        indexed[kid] = entry
    return indexed


def parse_jwks(jwks: Mapping[str, Any]) -> dict[str, Ed25519PublicKey]:
    """Return every key of an Ed25519 JWKS by ``kid``; any other key type is an error."""
    return {kid: public_key_from_jwk(entry) for kid, entry in index_jwks(jwks).items()}


def _decode_x(value: object) -> bytes:
    if not isinstance(value, str):
        raise JWKError("key has no string 'x' member")
    try:
        raw = b64url_decode(value)
    except ValueError as exc:
        raise JWKError(f"'x' is not base64url: {exc}") from exc
    if len(raw) != ED25519_KEY_BYTES:
        raise JWKError(f"'x' is {len(raw)} bytes, not {ED25519_KEY_BYTES}")
    return raw
