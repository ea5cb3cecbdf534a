"""The cryptographic primitives of the log, in one place.

* Payloads and metadata: AES-256-GCM under the subject's data key (DEK), with
  associated data naming the row and field, so a ciphertext moved to another
  row or column fails to decrypt instead of being read as someone else's data.
* Data keys: wrapped with AES-256-GCM under a key-encryption key (KEK).
* Subjects: identified on disk by HMAC-SHA256 under a secret key, so the raw
  user id never reaches disk and cannot be recovered by guessing ids without
  that key.
* Integrity: SHA-256 digests of ciphertext, chained per stream.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from eventstore.errors import IntegrityViolationError

# cryptography's bindings take longer to load than the rest of the log's modules
# together: they are imported when a key is first used, so that commands which
# never encrypt (``oblivio keys list``) start without them.
if TYPE_CHECKING:
    from cryptography.exceptions import InvalidTag

KEY_BYTES = 32
NONCE_BYTES = 12
GENESIS_HASH = bytes(32)  # before anything: an empty audit export starts here


def random_key() -> bytes:
    """A fresh 256-bit key from the OS CSPRNG."""
    return os.urandom(KEY_BYTES)


def encrypt(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """Return ``nonce || ciphertext || tag``. Nonces are random: 96 bits is safe
    for the number of messages one subject key will ever see."""
    return AeadKey(key).encrypt(plaintext, aad)


def decrypt(key: bytes, blob: bytes, aad: bytes) -> bytes:
    """Inverse of :func:`encrypt`; tampering raises :class:`IntegrityViolationError`."""
    return AeadKey(key).decrypt(blob, aad)


class AeadKey:
    """One AES-256-GCM key, set up once for the many events of one stream.

    Setting up the cipher costs as much as encrypting a small event, so reads
    and batch appends keep one per data key for the duration of one call.
    """

    __slots__ = ("_aead",)

    def __init__(self, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)

    def encrypt(self, plaintext: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(NONCE_BYTES)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def encrypt_all(self, messages: Sequence[tuple[bytes, bytes]]) -> list[bytes]:
        """:meth:`encrypt` for each ``(plaintext, aad)``, the nonces drawn in one read.

        One call into the OS CSPRNG per batch instead of one per event: the
        nonces are as random, and each still used once.
        """
        nonces = os.urandom(NONCE_BYTES * len(messages))
        encrypt = self._aead.encrypt
        sealed = []
        for start, (plaintext, aad) in zip(
            range(0, len(nonces), NONCE_BYTES), messages, strict=True
        ):
            nonce = nonces[start : start + NONCE_BYTES]
            sealed.append(nonce + encrypt(nonce, plaintext, aad))
        return sealed

    def decrypt(self, blob: bytes, aad: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        try:
            return self._aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], aad)
        except InvalidTag as e:
            raise IntegrityViolationError("ciphertext failed authentication") from e

    @property
    def decrypt_parts(self) -> Callable[[bytes, bytes, bytes], bytes]:
        """AES-GCM's own ``decrypt(nonce, ciphertext, aad)``, for loops that split blobs themselves.

        Reads open every event of a stream with it, inline (see
        ``EventDecoder.decode_all``): a Python call per event around it cost
        more than the decryption.  It raises ``InvalidTag`` (re-exported here
        as :data:`AuthenticationFailed`) where :meth:`decrypt` raises
        :class:`IntegrityViolationError`.
        """
        return self._aead.decrypt


if TYPE_CHECKING:
    #: What :attr:`AeadKey.decrypt_parts` raises on a ciphertext that fails authentication.
    AuthenticationFailed = InvalidTag
else:

    def __getattr__(name: str) -> type[Exception]:
        if name == "AuthenticationFailed":  # loaded on first use, as above
            from cryptography.exceptions import InvalidTag

            return InvalidTag
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


EVENT_AAD_LABEL = b"oblivio/event/v2\0"
#: ``pack_event_aad(EVENT_AAD_LABEL, event_id.int.to_bytes(16, "big"), stream_id, version)``
#: is :func:`event_aad`, for the read loop that builds it inline, once per event.
pack_event_aad = struct.Struct(f">{len(EVENT_AAD_LABEL)}s16sQQ").pack


def event_aad(event_id: uuid.UUID, stream_id: int, version: int) -> bytes:
    """Associated data binding an event's ciphertext (data and metadata) to its row."""
    return pack_event_aad(EVENT_AAD_LABEL, event_id.int.to_bytes(16, "big"), stream_id, version)


def projection_aad(stream_id: int, purpose: str, row_id: bytes) -> bytes:
    """Associated data binding a projection value to its stream, purpose and row."""
    return (
        b"oblivio/projection/v1\0"
        + struct.pack(">Q", stream_id)
        + purpose.encode()
        + b"\0"
        + row_id
    )


def dek_aad(dek_id: uuid.UUID, kek_version: int) -> bytes:
    """Associated data binding a wrapped data key to its id and KEK version."""
    return b"oblivio/dek/v1\0" + dek_id.bytes + struct.pack(">I", kek_version)


def subject_key(hmac_key: bytes, namespace: str, subject: str) -> bytes:
    """The pseudonymous on-disk identity of a subject within a namespace."""
    message = b"subject\0" + namespace.encode() + b"\0" + subject.encode()
    # hmac.digest is the one-shot form (OpenSSL's, in C): same bytes as
    # hmac.new(...).digest() without building an HMAC object per call.
    return hmac.digest(hmac_key, message, "sha256")


_sha256 = hashlib.sha256


def ciphertext_digest(ciphertext: bytes) -> bytes:
    """SHA-256 over an event's ciphertext (its data and metadata, sealed together)."""
    return _sha256(b"oblivio/digest/v2\0" + ciphertext).digest()


def stream_genesis(namespace: str, subject_key: bytes, generation: int) -> bytes:
    """The chain value before a stream's first event, naming the stream itself, so
    that moving a stream to another subject or generation breaks its chain."""
    h = hashlib.sha256(b"oblivio/genesis/v1")
    h.update(namespace.encode() + b"\0" + subject_key + struct.pack(">I", generation))
    return h.digest()


def chain_hash(
    previous: bytes,
    event_id: uuid.UUID,
    version: int,
    event_type: str,
    schema_version: int,
    recorded_at: datetime,
    digest: bytes,
) -> bytes:
    """H(previous, event id, version, type, schema version, recorded time, digest).

    Only ciphertext digests enter the chain, so it still verifies after an
    erasure removes payloads and destroys keys.
    """
    return chain_link(
        previous, event_id, version, event_type, schema_version, chain_micros(recorded_at), digest
    )


def chain_micros(recorded_at: datetime) -> int:
    """The recorded time as the chain hashes it: microseconds since the epoch."""
    return int(recorded_at.timestamp()) * 1_000_000 + recorded_at.microsecond


_CHAIN_LABEL = b"oblivio/chain/v1"
_pack_chain_fields = struct.Struct(">QIqH").pack


def chain_link(
    previous: bytes,
    event_id: uuid.UUID,
    version: int,
    event_type: str,
    schema_version: int,
    micros: int,
    digest: bytes,
) -> bytes:
    """:func:`chain_hash` with the time already in microseconds (a batch shares it)."""
    type_bytes = event_type.encode()
    fields = _pack_chain_fields(version, schema_version, micros, len(type_bytes))
    return _sha256(_CHAIN_LABEL + previous + event_id.bytes + fields + type_bytes + digest).digest()
