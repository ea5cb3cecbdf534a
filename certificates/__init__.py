"""Signed forget certificates for oblivio, as a self-contained leaf package.

A certificate is a JWS in the JSON serialization (RFC 7515 §7.2) signed with Ed25519
(``alg: Ed25519``, RFC 9864; older ``EdDSA`` ones still verify) whose payload and protected
header are RFC 8785 canonical JSON.
Issuer keys live in an :class:`IssuerKeyring`; each key is named by its RFC 7638 thumbprint
(``kid``), and the public halves of all keys, retired ones included, are published as a
JWKS so that any JOSE library can check a certificate offline. :func:`merkle_root` and its
audit proofs (RFC 6962) commit a certificate to the digests of the erased events. This
package imports nothing else from oblivio: only the standard library and ``cryptography``.
"""

from __future__ import annotations

from certificates.base64url import b64url_decode, b64url_encode
from certificates.canonical import canonicalize, format_number
from certificates.errors import (
    VERIFICATION_REASONS,
    CanonicalizationError,
    CertificatesError,
    CertificateVerificationError,
    JWKError,
    KeyringError,
    RetiredKeyError,
    VerificationReason,
)
from certificates.jwk import index_jwks, jwk_thumbprint, parse_jwks, public_jwk, public_key_from_jwk
from certificates.jws import ALGORITHM, CERTIFICATE_TYP, VerifiedPayload, sign, verify
from certificates.keys import IssuerKey, IssuerKeyring, key_id
from certificates.merkle import (
    leaf_hash,
    merkle_proof,
    merkle_root,
    node_hash,
    verify_merkle_proof,
)

__all__ = [
    "ALGORITHM",
    "CERTIFICATE_TYP",
    "VERIFICATION_REASONS",
    "CanonicalizationError",
    "CertificateVerificationError",
    "CertificatesError",
    "IssuerKey",
    "IssuerKeyring",
    "JWKError",
    "KeyringError",
    "RetiredKeyError",
    "VerificationReason",
    "VerifiedPayload",
    "b64url_decode",
    "b64url_encode",
    "canonicalize",
    "format_number",
    "index_jwks",
    "jwk_thumbprint",
    "key_id",
    "leaf_hash",
    "merkle_proof",
    "merkle_root",
    "node_hash",
    "parse_jwks",
    "public_jwk",
    "public_key_from_jwk",
    "sign",
    "verify",
    "verify_merkle_proof",
]
