"""Unpadded base64url (RFC 7515 §2) with strict, canonical decoding."""

from __future__ import annotations

import base64
import binascii
import re

_ALPHABET = re.compile(r"[A-Za-z0-9_-]*")


def b64url_encode(data: bytes) -> str:
    """Encode ``data`` as base64url without ``=`` padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode unpadded base64url, accepting only the one canonical encoding of the bytes.

    Raises ``ValueError`` for padding, characters outside the alphabet, impossible lengths
    and non-zero unused trailing bits.
    """
    # Security: a lenient decoder ignores the unused low bits of the last character, so
    # several strings decode to the same bytes. A certificate whose signature string was
    # altered would then still verify. Re-encoding and comparing removes that slack.
    if not _ALPHABET.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError("not unpadded base64url") from exc
    if b64url_encode(data) != text:
        raise ValueError("non-canonical base64url (unused bits set)")
    return data
