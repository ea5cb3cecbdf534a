"""Generated event ids: RFC 9562 version 7 UUIDs, time-ordered, drawn per batch."""

from __future__ import annotations

import copy
import pickle
import time
import uuid

import pytest

from eventstore import KeyringFile, NewEvent
from eventstore.codec import EventCodec, time_ordered_event_ids

# Bits a version 7 id fixes: 48 bits of milliseconds, the version nibble, the variant.
_TIME_BITS = 0xFFFF_FFFF_FFFF << 80
_VERSION_BITS = 0xF000 << 64
_VARIANT_BITS = 0xC000 << 48
_ALL_BITS = 2**128 - 1


def _unix_ms(event_id: uuid.UUID) -> int:
    return event_id.int >> 80


def test_ids_are_version_7_uuids_that_behave_as_built_by_uuid() -> None:
    ids = time_ordered_event_ids(1000)
    assert len(set(ids)) == 1000
    for event_id in ids:
        rebuilt = uuid.UUID(str(event_id))
        assert event_id.version == 7
        assert event_id.variant == uuid.RFC_4122
        assert str(event_id)[14] == "7"
        assert rebuilt == event_id
        assert hash(rebuilt) == hash(event_id)
        assert uuid.UUID(bytes=event_id.bytes) == event_id
        assert event_id.is_safe is uuid.SafeUUID.unknown
    assert pickle.loads(pickle.dumps(ids)) == ids
    assert copy.deepcopy(ids) == ids
    with pytest.raises(TypeError):
        ids[0].int = 1  # type: ignore[misc]


def test_the_first_48_bits_are_the_unix_time_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    ids = time_ordered_event_ids(50)
    after = time.time_ns() // 1_000_000
    assert {_unix_ms(i) for i in ids} <= set(range(before, after + 1))
    # The layout puts the big-endian milliseconds first in the id's bytes.
    assert int.from_bytes(ids[0].bytes[:6], "big") == _unix_ms(ids[0])


def test_ids_rise_within_a_batch_and_from_batch_to_batch_across_milliseconds() -> None:
    for size in (2, 100, 5000):
        ids = time_ordered_event_ids(size)
        assert ids == sorted(ids)
        assert [i.bytes for i in ids] == sorted(i.bytes for i in ids)  # byte order as well
    first = time_ordered_event_ids(10)
    time.sleep(0.003)
    second = time_ordered_event_ids(10)
    assert max(first) < min(second)


def test_every_random_bit_varies() -> None:
    ids = time_ordered_event_ids(256)
    random_bits = _ALL_BITS & ~(_TIME_BITS | _VERSION_BITS | _VARIANT_BITS)
    assert random_bits.bit_count() == 74
    ones = 0
    zeros = 0
    for event_id in ids:
        ones |= event_id.int
        zeros |= ~event_id.int & _ALL_BITS
    assert ones & random_bits == random_bits
    assert zeros & random_bits == random_bits


def test_a_batch_gets_fresh_ids_only_where_the_caller_chose_none(keyring: KeyringFile) -> None:
    chosen = uuid.uuid4()
    events = [NewEvent("a.b", {}), NewEvent("a.b", {}, event_id=chosen), NewEvent("a.b", {})]
    codec = EventCodec(keyring)
    encoded = codec.encode_all(events)
    assert [e.caller_id for e in encoded] == [False, True, False]
    assert encoded[1].event_id == chosen  # a caller's id is kept, whatever its version
    assert len({e.event_id for e in encoded}) == 3
    assert [e.event_id.version for e in encoded] == [7, 4, 7]
    assert encoded[0].event_id < encoded[2].event_id
    assert abs(_unix_ms(encoded[0].event_id) - time.time() * 1000) < 60_000
