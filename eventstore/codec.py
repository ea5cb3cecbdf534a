"""Turns events into the bytes stored on disk and back. No SQL here.

The codec owns the rules for what may be stored (size, UTF-8, JSON) and the
encryption of every personal field, so the SQL layer only ever sees opaque
ciphertext, digests and keyed hashes.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from eventstore import crypto
from eventstore.errors import (
    InvalidEncodingError,
    InvalidInputError,
    PayloadTooLargeError,
)
from eventstore.ids import check_event_type
from eventstore.keys import KeyProvider
from eventstore.model import NewEvent

DEFAULT_MAX_EVENT_BYTES = 1024 * 1024  # 1 MiB of encoded payload + metadata


class EncodedEvent(NamedTuple):
    """The plaintext form of one event, validated and ready to encrypt.

    A named tuple, immutable like the frozen dataclass it was: one is built for
    every appended event, and the dataclass's ``__init__`` (an
    ``object.__setattr__`` per field) cost more than encoding the event's JSON.
    """

    event_id: uuid.UUID
    type: str
    schema_version: int
    payload: bytes
    metadata: bytes
    caller_id: bool  # the caller chose the id (so it may already exist)

    def plaintext(self) -> bytes:
        """Data and metadata as one JSON array ``[data, metadata]``: what gets encrypted.

        The one form every writer uses; :func:`parse_content` reads it (and
        the form older releases also wrote, with a leading space).
        """
        return b"[" + self.payload + b"," + self.metadata + b"]"


@dataclass(frozen=True)
class WrappedKey:
    dek_id: uuid.UUID
    kek_version: int
    wrapped: bytes


class SubjectCipher:
    """Encrypts values derived from one subject's events under that subject's key.

    Projections use it for node text and embeddings, so erasing the subject's
    key makes its projection rows as unreadable as its events.  The associated
    data names the purpose and the row, so a value cannot be moved elsewhere.
    """

    def __init__(self, dek: bytes, stream_id: int) -> None:
        self._dek = dek
        self._key = crypto.AeadKey(dek)
        self.stream_id = stream_id

    def seal(self, purpose: str, row_id: bytes, plaintext: bytes) -> bytes:
        return self._key.encrypt(plaintext, self._aad(purpose, row_id))

    def open(self, purpose: str, row_id: bytes, blob: bytes) -> bytes:
        return self._key.decrypt(blob, self._aad(purpose, row_id))

    @property
    def aead(self) -> crypto.AeadKey:
        """The data key, set up for AES-256-GCM: what a batch of events is sealed with."""
        return self._key

    @property
    def decrypt_parts(self) -> Callable[[bytes, bytes, bytes], bytes]:
        """The key's :attr:`crypto.AeadKey.decrypt_parts`: events are sealed under the
        same data key, so a read decrypts its events with the cipher it then hands on."""
        return self._key.decrypt_parts

    def mac(self, purpose: str, message: bytes) -> bytes:
        """A keyed hash under the subject's key: stable while the key lives, unguessable."""
        return hmac.new(self._dek, self._aad(purpose, message), hashlib.sha256).digest()

    def _aad(self, purpose: str, row_id: bytes) -> bytes:
        return crypto.projection_aad(self.stream_id, purpose, row_id)


# Built once: json.dumps with anything but default options builds a new
# encoder on every call.
_JSON_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


# orjson writes the same bytes as the encoder above for most values in a
# tenth of its time, but not for all: it formats floats between about 1e-9
# and 1e-4 without an exponent (0.0000999 against 9.99e-05), writes NaN as
# null, and serialises types the standard encoder refuses (UUIDs, datetimes,
# dataclasses, subclasses of int, str, dict and list).  So it is used only
# for values built from exactly dict (str keys), list, str, int within 64
# bits, bool, None and finite floats that are 0 or at least 1e-4 in
# magnitude; everything else, and anything orjson refuses (lone surrogates,
# nesting beyond its limit), goes to the standard encoder, which decides and
# words the error.  tests/eventstore/test_canonical_json.py compares the two
# over arbitrary values.
_ORJSON_SORTED = orjson.OPT_SORT_KEYS
_ORJSON_MAX_DEPTH = 200  # orjson refuses nesting beyond 254 levels
_INT_RANGE = range(-(2**63), 2**64)  # orjson's integers: i64 and u64
_SMALLEST_SAME_FLOAT = 1e-4
_LARGEST_FLOAT = sys.float_info.max


def _orjson_writes_the_same(value: Any, depth: int = 0) -> bool:
    """True when orjson's sorted encoding of ``value`` is the standard encoder's, byte for byte."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is float:
        number: float = value
        return number == 0.0 or _SMALLEST_SAME_FLOAT <= abs(number) <= _LARGEST_FLOAT
    if kind is int:
        return value in _INT_RANGE
    if depth >= _ORJSON_MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            if type(item) is str:
                continue  # the common case, without a call
            if not _orjson_writes_the_same(item, depth + 1):
                return False
        return True
    if kind is list:
        return all(_orjson_writes_the_same(item, depth + 1) for item in value)
    return False


def encode_json(value: Mapping[str, Any], what: str) -> bytes:
    """Deterministic JSON (sorted keys, no spaces); refuses NaN and lone surrogates.

    orjson when it writes what the standard encoder would, else the standard encoder."""
    if type(value) is dict:
        if not value:
            return b"{}"  # most events carry no metadata
    elif not isinstance(value, Mapping):
        raise InvalidInputError(f"{what} must be a JSON object")
    if _orjson_writes_the_same(value):
        try:
            return orjson.dumps(value, option=_ORJSON_SORTED)
        except orjson.JSONEncodeError:
            pass  # e.g. a lone surrogate: the standard encoder's error below
    return _standard_json(value, what)


def _standard_json(value: Mapping[str, Any], what: str) -> bytes:
    try:
        text = _JSON_ENCODER.encode(value)
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"{what} is not serialisable as JSON: {e}") from e
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidEncodingError(f"{what} contains text that is not valid UTF-8") from e


def from_json_bytes(raw: bytes) -> dict[str, Any]:
    value = json.loads(raw.decode("utf-8"))
    assert isinstance(value, dict)
    return value


# orjson parses an event in a fraction of the standard library's time, but
# reads an integer beyond 64 bits (below -2**63 or above 2**64 - 1) as a float.
# Such a number needs at least 20 digits in a row, or a minus sign and 19, so
# plaintexts with a digit run that long (rare, and mostly digits inside
# strings) take the exact parser.  Counting all digits
# first is cheap and settles almost every event without the regex.  Older
# releases started some plaintexts with a space (JSON whitespace, which both
# parsers skip), so those rows read the same way.
_LONG_DIGIT_RUN = re.compile(rb"-[0-9]{19}|[0-9]{20}")
_NOT_DIGITS = bytes(b for b in range(256) if not 0x30 <= b <= 0x39)


def small_numbers(json_text: bytes) -> bool:
    """Whether every number in ``json_text`` surely fits in 64 bits (no 20-digit run,
    no 19 digits after a minus sign)."""
    return (
        len(json_text.translate(None, _NOT_DIGITS)) < 19
        or _LONG_DIGIT_RUN.search(json_text) is None
    )


def parse_content(plaintext: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(data, metadata)`` from the plaintext of :meth:`EncodedEvent.plaintext`."""
    if small_numbers(plaintext):
        try:
            data, metadata = orjson.loads(plaintext)
            return data, metadata
        except orjson.JSONDecodeError:
            pass  # let the standard parser decide (and say) what is wrong
    data, metadata = json.loads(plaintext.decode("utf-8"))
    return data, metadata


# Generated event ids are time-ordered UUIDs in RFC 9562's version 7 layout:
# 48 bits of Unix time in milliseconds, the version nibble 7, 74 random bits
# around the RFC 4122 variant.  Random version 4 ids landed anywhere in the
# b-tree of the unique ``event_id`` index, so a 100-event append dirtied up to
# 100 of its pages (and after each checkpoint wrote a full-page image of each
# to the WAL); ids of one millisecond sit side by side at the index's right
# edge.  What an id then reveals, its creation time to the millisecond, is
# stored next to it anyway (``recorded_at``; see docs/eventstore.md).
# A batch's random bits come from one read of the OS CSPRNG (uuid.uuid4()
# reads 16 bytes per id and validates its arguments in Python); the ids of a
# batch share the millisecond, and sorting their random bits makes them rise
# within the batch, as RFC 9562's monotonicity asks, without a counter that
# would give away how many ids a process drew.  Each object is set up
# through UUID's slots as its __init__ would (tests/eventstore/test_codec_ids.py).
_UUID_RANDOM_BITS = ~((0xFFFF_FFFF_FFFF_F000 << 64) | (0xC000 << 48)) & (2**128 - 1)
_UUID_VERSION_7 = (0x7000 << 64) | (0x8000 << 48)
_UUID_TIME_SHIFT = 80
_set_uuid_int = uuid.UUID.__dict__["int"].__set__
_set_uuid_is_safe = uuid.UUID.__dict__["is_safe"].__set__
_UNKNOWN_SAFETY = uuid.SafeUUID.unknown


def time_ordered_event_ids(count: int) -> list[uuid.UUID]:
    """``count`` version 7 UUIDs of the current millisecond, rising in list order."""
    random = os.urandom(16 * count)
    from_bytes = int.from_bytes
    fixed = ((time.time_ns() // 1_000_000) << _UUID_TIME_SHIFT) | _UUID_VERSION_7
    values = [
        from_bytes(random[start : start + 16], "big") & _UUID_RANDOM_BITS
        for start in range(0, 16 * count, 16)
    ]
    values.sort()
    ids = []
    for value in values:
        event_id = object.__new__(uuid.UUID)
        _set_uuid_int(event_id, value | fixed)
        _set_uuid_is_safe(event_id, _UNKNOWN_SAFETY)
        ids.append(event_id)
    return ids


class EventCodec:
    """Validates, encrypts and decrypts event content and data keys."""

    def __init__(self, keys: KeyProvider, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self.keys = keys
        self.max_event_bytes = max_event_bytes
        self._kek_ciphers: dict[int, tuple[bytes, crypto.AeadKey]] = {}

    def subject_key(self, namespace: str, subject: str) -> bytes:
        return crypto.subject_key(self.keys.subject_hmac_key(), namespace, subject)

    def pseudonym(self, kind: str, value: str) -> str:
        """A keyed hash naming a person (an actor, a requester) without revealing them."""
        message = b"pseudonym\0" + kind.encode() + b"\0" + value.encode()
        return hmac.new(self.keys.subject_hmac_key(), message, hashlib.sha256).hexdigest()

    def encode_all(self, events: Sequence[NewEvent]) -> list[EncodedEvent]:
        """:meth:`encode` for each event, the ids of those without one drawn at once."""
        fresh = iter(time_ordered_event_ids(sum(1 for e in events if e.event_id is None)))
        return [self.encode(e, e.event_id or next(fresh)) for e in events]

    def encode(self, event: NewEvent, event_id: uuid.UUID | None = None) -> EncodedEvent:
        """Validate one new event; raises an :class:`InvalidInputError` subclass.

        ``event_id``: the id for an event that brings none (default: a new time-ordered one).
        """
        check_event_type(event.type)
        if not isinstance(event.schema_version, int) or not 1 <= event.schema_version < 2**31:
            raise InvalidInputError("schema_version must be a positive integer")
        payload = encode_json(event.data, "event data")
        metadata = encode_json(event.metadata, "event metadata")
        size = len(payload) + len(metadata)
        if size > self.max_event_bytes:
            raise PayloadTooLargeError(
                f"event is {size} bytes, the limit is {self.max_event_bytes} bytes"
            )
        event_id = event.event_id or event_id or time_ordered_event_ids(1)[0]
        if not isinstance(event_id, uuid.UUID):
            raise InvalidInputError("event_id must be a UUID")
        return EncodedEvent(
            event_id,
            event.type,
            event.schema_version,
            payload,
            metadata,
            caller_id=event.event_id is not None,
        )

    @staticmethod
    def seal_all(
        key: crypto.AeadKey, events: Sequence[EncodedEvent], stream_id: int, first_version: int
    ) -> list[bytes]:
        """One ciphertext per event for data and metadata together (one AES-GCM operation),
        bound to its event id, stream and version (``first_version``, then counting up)."""
        return key.encrypt_all(
            [
                (event.plaintext(), crypto.event_aad(event.event_id, stream_id, version))
                for version, event in enumerate(events, start=first_version)
            ]
        )

    @staticmethod
    def open(
        key: crypto.AeadKey, event_id: uuid.UUID, stream_id: int, version: int, ciphertext: bytes
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Decrypt and parse an event's data and metadata (one AES-GCM, one JSON parse)."""
        plaintext = key.decrypt(ciphertext, crypto.event_aad(event_id, stream_id, version))
        return parse_content(plaintext)

    def new_data_key(self) -> tuple[bytes, WrappedKey]:
        """A fresh DEK and its wrapped form under the active KEK."""
        dek = crypto.random_key()
        return dek, self.wrap(dek, uuid.uuid4())

    def wrap(self, dek: bytes, dek_id: uuid.UUID) -> WrappedKey:
        version = self.keys.active_kek_version
        wrapped = crypto.encrypt(self.keys.kek(version), dek, crypto.dek_aad(dek_id, version))
        return WrappedKey(dek_id, version, wrapped)

    def unwrap(self, key: WrappedKey) -> bytes:
        kek = self.keys.kek(key.kek_version)
        aad = crypto.dek_aad(key.dek_id, key.kek_version)
        return self._kek_cipher(key.kek_version, kek).decrypt(key.wrapped, aad)

    def _kek_cipher(self, version: int, kek: bytes) -> crypto.AeadKey:
        """The cipher of ``kek``, set up once while the provider keeps handing out these bytes.

        Setting up AES-GCM costs as much as the unwrap itself, once per append.
        The provider is still asked for the KEK every time, so a retired or
        removed KEK stops unwrapping exactly as before; only identical key
        material reuses the cipher.
        """
        cached = self._kek_ciphers.get(version)
        if cached is None or cached[0] != kek:
            cached = (kek, crypto.AeadKey(kek))
            self._kek_ciphers[version] = cached
        return cached[1]
