"""Any change to any character of a signed certificate must make verification fail."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certificates import (
    VERIFICATION_REASONS,
    CertificateVerificationError,
    IssuerKeyring,
    b64url_decode,
    b64url_encode,
    sign,
    verify,
)

ALPHABET = string.ascii_uppercase + string.ascii_lowercase + string.digits + "-_"
PARTS = ("protected", "payload", "signature")

KEYRING = IssuerKeyring.generate()
JWKS = KEYRING.jwks()
CERTIFICATE = sign(
    {"certificate_id": "c-1", "events_erased": 3, "namespace": "agents/😀", "equal": True},
    KEYRING.active,
)


def _refused(jws: dict[str, str]) -> str:
    with pytest.raises(CertificateVerificationError) as caught:
        verify(jws, JWKS)
    assert caught.value.reason in VERIFICATION_REASONS
    return caught.value.reason


def _with(part: str, text: str) -> dict[str, str]:
    return {**CERTIFICATE, part: text}


def test_untampered_certificate_verifies() -> None:
    assert verify(CERTIFICATE, JWKS).kid == KEYRING.active.kid


@pytest.mark.parametrize("part", PARTS)
def test_every_character_substitution_is_detected(part: str) -> None:
    original = CERTIFICATE[part]
    for position, char in enumerate(original):
        for replacement in {ALPHABET[(ALPHABET.index(char) + 1) % 64], ALPHABET[0], "_"} - {char}:
            _refused(_with(part, original[:position] + replacement + original[position + 1 :]))


@pytest.mark.parametrize("part", PARTS)
def test_every_bit_of_every_decoded_byte_is_covered(part: str) -> None:
    # Flipping the decoded bytes (rather than characters) also reaches the last byte, whose
    # character shares bits with padding.
    raw = b64url_decode(CERTIFICATE[part])
    for position in range(len(raw)):
        for bit in (0x01, 0x80):
            flipped = bytearray(raw)
            flipped[position] ^= bit
            _refused(_with(part, b64url_encode(bytes(flipped))))


@pytest.mark.parametrize("part", PARTS)
def test_truncation_and_extension_are_detected(part: str) -> None:
    original = CERTIFICATE[part]
    for cut in range(len(original)):
        _refused(_with(part, original[:cut]))
    for suffix in ("A", "AA", "AAA", "AAAA", "="):
        _refused(_with(part, original + suffix))


def test_unused_trailing_bits_of_the_signature_are_detected() -> None:
    # 64 signature bytes take 86 characters; the last one carries 4 unused bits. A lenient
    # decoder maps all 16 of its variants to the same bytes.
    signature = CERTIFICATE["signature"]
    last = ALPHABET.index(signature[-1])
    for unused in range(1, 16):
        variant = signature[:-1] + ALPHABET[last ^ unused]
        assert _refused(_with("signature", variant)) == "bad_base64url"


def test_swapped_parts_between_certificates_are_detected() -> None:
    other = sign({"certificate_id": "c-2"}, KEYRING.active)
    assert other["protected"] == CERTIFICATE["protected"]  # same key, same header
    for part in ("payload", "signature"):
        _refused(_with(part, other[part]))


@settings(max_examples=300, deadline=None)
@given(
    part=st.sampled_from(PARTS),
    data=st.data(),
    replacement=st.characters(codec="utf-8") | st.sampled_from(ALPHABET),
)
def test_random_substitution_is_detected(part: str, data: Any, replacement: str) -> None:
    original = CERTIFICATE[part]
    position = data.draw(st.integers(min_value=0, max_value=len(original) - 1))
    if original[position] == replacement:
        return
    _refused(_with(part, original[:position] + replacement + original[position + 1 :]))
