"""The error tree of the certificates package.

Every error is a :class:`CertificatesError`; the ones raised for bad input also subclass
:class:`ValueError` so callers that only know the standard library still catch them.
"""

from __future__ import annotations

from typing import Literal, get_args


class CertificatesError(Exception):
    """The certificate machinery failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


class CanonicalizationError(CertificatesError, ValueError):
    """The value cannot be written as RFC 8785 canonical JSON."""


class KeyringError(CertificatesError, ValueError):
    """The issuer keyring is missing, malformed or unsafe to use."""


class RetiredKeyError(KeyringError):
    """A retired issuer key was asked to sign; retired keys only verify."""


class JWKError(CertificatesError, ValueError):
    """The JWK or JWKS is not a well-formed RFC 8037 Ed25519 public key set."""


VerificationReason = Literal[
    "malformed_serialization",
    "bad_base64url",
    "bad_header",
    "header_not_canonical",
    "unsupported_alg",
    "unknown_kid",
    "bad_jwks",
    "bad_key",
    "bad_signature",
    "payload_not_canonical",
]
"""Why a certificate failed verification (the ``reason`` of the error)."""

VERIFICATION_REASONS: frozenset[str] = frozenset(get_args(VerificationReason))


class CertificateVerificationError(CertificatesError, ValueError):
    """The certificate failed verification."""

    def __init__(self, reason: VerificationReason, detail: str) -> None:
        self.reason: VerificationReason = reason
        self.detail = detail
        super().__init__(f"certificate verification failed ({reason}): {detail}")
