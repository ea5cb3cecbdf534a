"""JWS JSON serialization (RFC 7515 §7.2) signed with Ed25519 (``alg: Ed25519``, RFC 9864).

New signatures name the fully-specified algorithm ``Ed25519``; RFC 9864 deprecates the
polymorphic ``EdDSA`` of RFC 8037, which certificates issued before carry and which still
verify here: both names mean the same Ed25519 signature over the same bytes.

Both the protected header and the payload are RFC 8785 canonical JSON, and the verifier
insists on it: it re-canonicalizes what it decoded and compares bytes, so a certificate
that was re-indented, re-ordered or re-escaped no longer verifies even where its signature
would.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from certificates.base64url import b64url_decode, b64url_encode
from certificates.canonical import MAX_SAFE_INTEGER, canonicalize
from certificates.errors import (
    CanonicalizationError,
    CertificateVerificationError,
    JWKError,
    RetiredKeyError,
    VerificationReason,
)
from certificates.jwk import index_jwks, public_key_from_jwk
from certificates.keys import IssuerKey

ALGORITHM = "Ed25519"
#: Every ``alg`` a signature may carry: ours, and the deprecated name older certificates use.
ACCEPTED_ALGORITHMS = frozenset({ALGORITHM, "EdDSA"})
CERTIFICATE_TYP = "oblivio-forget-certificate+jws"

# Only parameters we understand may appear. In particular "crit" (RFC 7515 §4.1.11) and
# "b64" (RFC 7797, which changes what the signature covers) are refused outright.
_HEADER_PARAMETERS = frozenset({"alg", "kid", "typ"})


@dataclass(frozen=True)
class VerifiedPayload:
    """A payload whose signature and canonical form were checked, and the key that signed."""

    payload: dict[str, Any]
    kid: str
    header: dict[str, Any]


def sign(
    payload: Mapping[str, Any], key: IssuerKey, *, typ: str = CERTIFICATE_TYP
) -> dict[str, str]:
    """Sign ``payload`` with ``key`` and return the flattened JWS JSON serialization.

    The result is ``{"payload", "protected", "signature"}``; the protected header is
    ``{"alg": "Ed25519", "kid": key.kid, "typ": typ}``. Raises :class:`RetiredKeyError` if
    ``key`` is retired and :class:`CanonicalizationError` if ``payload`` has no canonical
    JSON form.
    """
    if not key.is_active:
        raise RetiredKeyError(f"issuer key {key.kid} was retired at {key.retired_at}")
    if not isinstance(payload, Mapping):
        raise CanonicalizationError("a certificate payload must be a JSON object")
    protected = b64url_encode(canonicalize({"alg": ALGORITHM, "kid": key.kid, "typ": typ}))
    body = b64url_encode(canonicalize(payload))
    signature = key.private_key.sign(_signing_input(protected, body))
    return {"payload": body, "protected": protected, "signature": b64url_encode(signature)}


def verify(
    jws: Mapping[str, Any] | str, jwks: Mapping[str, Any], *, typ: str | None = CERTIFICATE_TYP
) -> VerifiedPayload:
    """Verify a JWS JSON serialization (flattened, or general with one signature).

    ``jwks`` is the issuer's published key set; ``typ`` is the required header ``typ``
    (``None`` accepts any or none). Returns the decoded payload and the signing kid, or
    raises :class:`CertificateVerificationError` whose ``reason`` says what failed.
    """
    protected, body, signature = _split_serialization(jws)
    header_bytes = _decode("protected header", protected)
    payload_bytes = _decode("payload", body)
    signature_bytes = _decode("signature", signature)
    header = _check_header(header_bytes, typ)
    public_key = _find_key(jwks, header["kid"])
    try:
        public_key.verify(signature_bytes, _signing_input(protected, body))
    except InvalidSignature:
        _fail("bad_signature", f"Ed25519 signature does not verify under kid {header['kid']}")
    # Security: the payload is parsed only once the signature vouches for its bytes.
    payload = _check_canonical_object(payload_bytes, "payload_not_canonical", "payload")
    return VerifiedPayload(payload=payload, kid=header["kid"], header=header)


def _signing_input(protected: str, body: str) -> bytes:
    return f"{protected}.{body}".encode("ascii")


def _split_serialization(jws: Mapping[str, Any] | str) -> tuple[str, str, str]:
    document: object = jws
    if isinstance(jws, str):
        try:
            document = _strict_json_text(jws)
        except (ValueError, RecursionError) as exc:
            _fail("malformed_serialization", f"not a JSON text: {exc}")
    if not isinstance(document, Mapping):
        _fail("malformed_serialization", "a JWS JSON serialization is an object")
    signed = _only_signature(document) if "signatures" in document else document
    # Security: an unprotected "header" member is not covered by the signature, so a kid
    # or alg placed there could be swapped freely; we accept protected parameters only.
    if "header" in signed or "header" in document:
        _fail("malformed_serialization", "unprotected 'header' members are not accepted")
    return _member(signed, "protected"), _member(document, "payload"), _member(signed, "signature")


def _member(document: Mapping[str, Any], name: str) -> str:
    value = document.get(name)
    if not isinstance(value, str):
        _fail("malformed_serialization", f"{name!r} is missing or not a string")
    return value


def _only_signature(document: Mapping[str, Any]) -> Mapping[str, Any]:
    signatures = document["signatures"]
    if "protected" in document or "signature" in document:
        _fail("malformed_serialization", "mixes the general and flattened forms")
    if not isinstance(signatures, list) or len(signatures) != 1:
        _fail("malformed_serialization", "general form must carry exactly one signature")
    only = signatures[0]
    if not isinstance(only, Mapping):
        _fail("malformed_serialization", "signature entry is not an object")
    return only


def _decode(part: str, text: str) -> bytes:
    try:
        return b64url_decode(text)
    except ValueError as exc:
        _fail("bad_base64url", f"{part}: {exc}")


def _check_header(raw: bytes, typ: str | None) -> dict[str, Any]:
    header = _check_canonical_object(raw, "header_not_canonical", "protected header")
    unknown = sorted(set(header) - _HEADER_PARAMETERS)
    if unknown:
        _fail("bad_header", f"unsupported header parameters {unknown}")
    if "alg" not in header:
        _fail("bad_header", "header has no 'alg'")
    if header["alg"] not in ACCEPTED_ALGORITHMS:
        # "none" and every other algorithm are refused by name: the key type alone must
        # never decide how the signature is checked (RFC 8725 §3.1).
        _fail("unsupported_alg", f"alg {header['alg']!r} is not {ALGORITHM!r} (or 'EdDSA')")
    if not isinstance(header.get("kid"), str):
        _fail("bad_header", "header has no string 'kid'")
    if typ is not None and header.get("typ") != typ:
        _fail("bad_header", f"typ {header.get('typ')!r} is not {typ!r}")
    return header


def _find_key(jwks: Mapping[str, Any], kid: str) -> Ed25519PublicKey:
    try:
        entries = index_jwks(jwks)
    except JWKError as exc:
        _fail("bad_jwks", str(exc))
    if kid not in entries:
        _fail("unknown_kid", f"kid {kid!r} is not in the JWKS")
    try:
        return public_key_from_jwk(entries[kid])
    except JWKError as exc:
        _fail("bad_key", f"kid {kid!r}: {exc}")


def _check_canonical_object(raw: bytes, reason: VerificationReason, part: str) -> dict[str, Any]:
    """Parse ``raw`` as a JSON object and require it to be exactly its canonical form."""
    try:
        value = _strict_json(raw)
        canonical = canonicalize(value)
    except (ValueError, RecursionError) as exc:
        _fail(reason, f"{part} is not JSON: {exc}")
    if not isinstance(value, dict):
        _fail(reason, f"{part} is not a JSON object")
    if canonical != raw:
        _fail(reason, f"{part} is not RFC 8785 canonical JSON")
    return value


def _strict_json(raw: bytes) -> Any:
    """Parse UTF-8 JSON, refusing duplicate names and NaN/Infinity literals."""
    return _strict_json_text(raw.decode("utf-8"))


def _strict_json_text(text: str) -> Any:
    return json.loads(
        text,
        object_pairs_hook=_unique_object,
        parse_constant=_no_constant,
        parse_int=_json_integer,
    )


def _json_integer(literal: str) -> int | float:
    # JCS numbers are IEEE doubles: a float such as 1e20 is canonically written
    # "100000000000000000000". Beyond 2**53 read the literal as the double it denotes, so
    # the re-canonicalization check compares doubles, as an ECMAScript verifier would.
    number = int(literal)
    return number if abs(number) <= MAX_SAFE_INTEGER else float(literal)


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Security: with duplicate names, parsers disagree on which value wins, so a signer and
    # a verifier could read two different certificates out of the same bytes.
    result = dict(pairs)
    if len(result) != len(pairs):
        raise ValueError("duplicate object member name")
    return result


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _fail(reason: VerificationReason, detail: str) -> NoReturn:
    raise CertificateVerificationError(reason, detail)
