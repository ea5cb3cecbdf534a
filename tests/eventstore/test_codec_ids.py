"""Event ids drawn for a whole batch at once are uuid4's ids in every respect."""

from __future__ import annotations

import copy
import pickle
import uuid

import pytest

from eventstore import KeyringFile, NewEvent
from eventstore.codec import EventCodec, random_event_ids


def test_ids_are_random_version_4_uuids_that_behave_as_built_by_uuid() -> None:
    ids = random_event_ids(1000)
    assert len(set(ids)) == 1000
    for event_id in ids:
        rebuilt = uuid.UUID(str(event_id))
        assert event_id.version == 4
        assert event_id.variant == uuid.RFC_4122
        assert rebuilt == event_id
        assert hash(rebuilt) == hash(event_id)
        assert uuid.UUID(bytes=event_id.bytes, version=4) == event_id
        assert event_id.is_safe is uuid.SafeUUID.unknown
    assert pickle.loads(pickle.dumps(ids)) == ids
    assert copy.deepcopy(ids) == ids
    with pytest.raises(TypeError):
        ids[0].int = 1  # type: ignore[misc]


def test_every_bit_outside_version_and_variant_varies() -> None:
    ids = random_event_ids(256)
    ones = 0
    zeros = 0
    for event_id in ids:
        ones |= event_id.int
        zeros |= ~event_id.int & (2**128 - 1)
    fixed = (0xF000 << 64) | (0xC000 << 48)
    assert ones & ~fixed == ~fixed & (2**128 - 1)
    assert zeros & ~fixed == ~fixed & (2**128 - 1)


def test_a_batch_gets_fresh_ids_only_where_the_caller_chose_none(keyring: KeyringFile) -> None:
    chosen = uuid.uuid4()
    events = [NewEvent("a.b", {}), NewEvent("a.b", {}, event_id=chosen), NewEvent("a.b", {})]
    codec = EventCodec(keyring)
    encoded = codec.encode_all(events)
    assert [e.caller_id for e in encoded] == [False, True, False]
    assert encoded[1].event_id == chosen
    assert len({e.event_id for e in encoded}) == 3
    assert all(e.event_id.version == 4 for e in encoded)
