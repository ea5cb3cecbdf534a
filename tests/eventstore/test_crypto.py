"""The byte formats the log's ciphertexts and chain are bound to, and batch encryption.

The known answers were computed with the code as it was before the hot paths
were rewritten for speed: a faster construction must produce the same bytes,
or every stored chain and ciphertext would stop verifying.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from eventstore import crypto
from eventstore.errors import IntegrityViolationError

EVENT_ID = uuid.UUID(int=12345)
RECORDED_AT = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def test_the_event_aad_keeps_its_byte_format() -> None:
    assert crypto.event_aad(EVENT_ID, 5, 9) == (
        b"oblivio/event/v2\0" + EVENT_ID.bytes + (5).to_bytes(8, "big") + (9).to_bytes(8, "big")
    )


def test_the_chain_hash_keeps_its_known_answer() -> None:
    chain = crypto.chain_hash(b"p" * 32, EVENT_ID, 7, "memory.stored", 2, RECORDED_AT, b"d" * 32)
    assert chain.hex() == "b40379b5bee74a85001505d8853b5bf280c5030f50514840569d142147ad5321"
    micros = crypto.chain_micros(RECORDED_AT)
    assert chain == crypto.chain_link(b"p" * 32, EVENT_ID, 7, "memory.stored", 2, micros, b"d" * 32)


def test_the_subject_key_keeps_its_known_answer() -> None:
    # Every stored stream is found by this value: a new way to compute it must
    # give the same bytes, or each subject would lose its stream.
    key = crypto.subject_key(b"k" * 32, "agents", "user-42")
    assert key.hex() == "87ab42ff796cb8ad15c91b12e3f619b8afa2aa34ceb031ad1ead33fbdb3e1cb8"


def test_encrypting_a_batch_uses_a_fresh_nonce_per_message_and_binds_each_to_its_aad() -> None:
    key = crypto.AeadKey(crypto.random_key())
    messages = [(f"event {n}".encode(), f"aad {n}".encode()) for n in range(50)]
    sealed = key.encrypt_all(messages)
    nonces = {blob[: crypto.NONCE_BYTES] for blob in sealed}
    assert len(nonces) == len(messages)
    assert [key.decrypt(blob, aad) for blob, (_, aad) in zip(sealed, messages, strict=True)] == [
        plaintext for plaintext, _ in messages
    ]
    with pytest.raises(IntegrityViolationError):
        key.decrypt(sealed[0], messages[1][1])
