"""What a process keeps of a person's data key between two stores (eventstore.heads).

Two clients on one database stand for two processes.  The head a client
remembers for its next store holds the data key only wrapped under a KEK: after
another process forgot the person, nothing this one still holds opens a copy of
their events taken before (a backup, say), and its next store starts a new
generation; after another process retired the KEK, its next store reads the key
as re-wrapped.
"""

from __future__ import annotations

import gc
import types
from collections.abc import Iterator
from datetime import timedelta

import pytest
import sqlalchemy as sa

from eventstore import IntegrityViolationError, KeyringFile
from eventstore.codec import SubjectCipher, WrappedKey
from eventstore.crypto import KEY_BYTES, AeadKey, event_aad
from eventstore.schema import data_keys, events
from oblivio.settings import Settings
from tests._clients import client_opener
from tests.memory._support import stream
from tests.memory.conftest import Opener
from workers.keys import rotate_keks
from workers.policy import KeyPolicy


def reachable(root: object) -> list[object]:
    """Every object ``root`` refers to, directly or not (classes, modules and functions
    aside): what anyone reading this process's memory finds through it."""
    seen: dict[int, object] = {}
    todo = [root]
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, type | types.ModuleType | types.FunctionType):
            continue
        seen[id(obj)] = obj
        todo.extend(gc.get_referents(obj))
    return list(seen.values())


def opens(key: bytes, row: sa.Row[object]) -> bool:
    """Whether ``key`` decrypts the stored event ``row``."""
    try:
        AeadKey(key).decrypt(row.payload, event_aad(row.event_id, row.stream_id, row.version))
    except IntegrityViolationError:
        return False
    return True


def test_a_forget_by_another_process_leaves_nothing_here_that_opens_the_events(
    reopen: Opener,
) -> None:
    memory, other = reopen(), reopen()
    first = memory.store("Alice's secret", user_id="alice")
    [old] = stream(memory, "alice")
    store = memory.context.store
    with store.backend.engine.connect() as conn:
        backup = conn.execute(sa.select(events).where(events.c.event_id == first)).one()
        key_row = conn.execute(
            sa.select(data_keys).where(data_keys.c.stream_id == old.stream.stream_id)
        ).one()
    data_key = store.codec.unwrap(
        WrappedKey(key_row.dek_id, key_row.kek_version, key_row.wrapped_key)
    )
    assert opens(data_key, backup)  # what the check below would find
    assert store.heads.get(memory.context.namespace, old.stream.subject_key) is not None

    other.forget("alice", wait=True)

    held = reachable(store.heads)
    assert [o for o in held if isinstance(o, SubjectCipher | AeadKey)] == []
    keys = [o for o in held if isinstance(o, bytes) and len(o) == KEY_BYTES]
    assert data_key not in keys
    assert [k for k in keys if opens(k, backup)] == []
    # The next store here misses at the closed generation and starts the next one.
    new = memory.store("Alice starts afresh", user_id="alice")
    [event] = stream(memory, "alice")
    assert (event.event_id, event.version, event.stream.generation) == (new, 1, 2)
    assert memory.get_event(first, user_id="alice") is None
    assert [n.content for n in memory.get_event_nodes(new, user_id="alice")] == [
        "Alice starts afresh"
    ]


@pytest.fixture
def fresh_reopen(fresh_settings: Settings) -> Iterator[Opener]:
    """Clients on a database and keyring of the test's own (it retires a KEK)."""
    yield from client_opener(fresh_settings)


def test_a_store_after_another_process_retired_the_remembered_keys_kek(
    fresh_reopen: Opener,
) -> None:
    running, rotating = fresh_reopen(), fresh_reopen()
    running.store("wrapped under KEK 1", user_id="alice")  # remembered, wrapped under 1
    keyring = rotating.context.store.codec.keys
    assert isinstance(keyring, KeyringFile)
    retire_at_once = KeyPolicy(rotate_every=timedelta(0), retire_after=timedelta(0))

    report = rotate_keks(rotating.context.store, keyring, retire_at_once, rotating.context.clock)

    assert report.retired == [1]
    after = running.store("after the rotation", user_id="alice")
    events_now = stream(running, "alice")
    assert [(e.version, e.stream.generation) for e in events_now] == [(1, 1), (2, 1)]
    assert [n.content for n in running.get_event_nodes(after, user_id="alice")] == [
        "after the rotation"
    ]
    again = running.store("at the head remembered now", user_id="alice")
    assert [e.version for e in stream(running, "alice") if e.event_id == again] == [3]
