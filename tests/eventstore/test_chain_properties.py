"""Properties of the integrity chain, checked with Hypothesis.

What the chain covers (see :mod:`eventstore.crypto` and :mod:`eventstore.integrity`):
per stream, ``H(previous, event id, version, type, schema version, recorded time,
ciphertext digest)``, plus a check that each stored digest matches the stored
ciphertext, that versions run 1, 2, 3… with increasing positions, and that the stream
row's head (version, chain hash) matches the last event.

These properties do not depend on the backend (the chain is computed over bytes the
codec produces), so they run on SQLite only, to keep them fast; the contract tests
run the same chain code against PostgreSQL. Each Hypothesis example gets a store of
its own, on a copy of a database migrated once per test, so examples (and shrinking)
never see each other's rows.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import event as label_example
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from eventstore import (
    ANY,
    START,
    ChainBreak,
    DuplicateEventError,
    Erasure,
    EventErasedError,
    EventStore,
    KeyringFile,
    KeyUnavailableError,
    NewEvent,
    RecordedEvent,
    Subject,
    create_backend,
)
from eventstore.model import ExpectedVersion
from eventstore.schema import events, stream_directory, streams

SUBJECTS = ("alice", "bob", "carol")
EVENT_TYPES = ("memory.stored", "memory.corrected", "node.reinforced")

_text = st.text(st.characters(codec="utf-8"), max_size=8)
_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
)
json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)
json_objects = st.dictionaries(_text, json_values, max_size=3)
new_events = st.builds(
    NewEvent, type=st.sampled_from(EVENT_TYPES), data=json_objects, metadata=json_objects
)
subjects = st.sampled_from(SUBJECTS)


@dataclass(frozen=True)
class StoreFactory:
    """Opens stores on copies of one migrated SQLite database."""

    template: Path
    keyring: KeyringFile

    @contextmanager
    def open(self) -> Iterator[EventStore]:
        path = self.template.with_name(f"example-{uuid.uuid4().hex}.sqlite3")
        with (
            closing(sqlite3.connect(self.template)) as source,
            closing(sqlite3.connect(path)) as copy,
        ):
            _no_fsync(copy, None)
            source.backup(copy)
        backend = create_backend(f"sqlite:///{path}")
        # Durability is not what these properties are about, and an fsync per
        # commit would dominate their run time; this listener runs after the
        # backend's own and relaxes only that pragma.
        sa.event.listen(backend.engine, "connect", _no_fsync)
        store = EventStore(backend, self.keyring)
        try:
            yield store
        finally:
            store.close()
            for leftover in path.parent.glob(f"{path.name}*"):
                leftover.unlink()


def _no_fsync(dbapi_connection: sqlite3.Connection, _record: object) -> None:
    dbapi_connection.execute("PRAGMA synchronous=OFF")


@pytest.fixture
def stores(sqlite_url: str, keyring: KeyringFile) -> StoreFactory:
    database = sa.engine.make_url(sqlite_url).database
    assert database is not None
    return StoreFactory(Path(database), keyring)


@pytest.fixture
def sqlite_store(stores: StoreFactory) -> Iterator[EventStore]:
    with stores.open() as store:
        yield store


# -- a. any sequence of operations keeps the chain verifying ------------------------


@dataclass(eq=False)
class ModelStream:
    """What the test expects of one stream generation."""

    stream_id: int
    generation: int
    events: list[ModelEvent] = field(default_factory=list)
    closed: bool = False
    key_destroyed: bool = False


@dataclass(eq=False)
class ModelEvent:
    event_id: uuid.UUID
    subject: str
    version: int
    type: str
    data: dict[str, Any]
    metadata: dict[str, Any]
    stream: ModelStream = field(repr=False)
    tombstoned: bool = False

    @property
    def erasure(self) -> Erasure | None:
        if self.tombstoned:
            return Erasure.TOMBSTONED
        return Erasure.KEY_DESTROYED if self.stream.key_destroyed else None


def assert_reads_as(read: RecordedEvent, expected: ModelEvent) -> None:
    assert (read.event_id, read.version, read.type) == (
        expected.event_id,
        expected.version,
        expected.type,
    )
    assert read.stream.stream_id == expected.stream.stream_id
    assert read.erasure is expected.erasure
    if read.erased:
        assert (read.data, read.metadata) == (None, None)
    else:
        assert (read.data, read.metadata) == (expected.data, expected.metadata)


class LogMachine(RuleBasedStateMachine):
    """Random appends, tombstones, key destructions and generation closes on one store.

    The test binds ``stores`` on a subclass; every run opens a store of its own.
    """

    stores: StoreFactory
    namespace = "default"

    def __init__(self) -> None:
        super().__init__()
        self._resources = ExitStack()
        self.store = self._resources.enter_context(self.stores.open())
        self.streams: dict[str, list[ModelStream]] = {s: [] for s in SUBJECTS}
        self.events: list[ModelEvent] = []  # in append (= global) order

    def latest(self, subject: str) -> ModelStream | None:
        generations = self.streams[subject]
        return generations[-1] if generations else None

    # -- operations --------------------------------------------------------------

    @rule(
        subject=subjects,
        batch=st.lists(new_events, min_size=1, max_size=4),
        check_version=st.booleans(),
    )
    def append(self, subject: str, batch: list[NewEvent], check_version: bool) -> None:
        latest = self.latest(subject)
        new_generation = latest is None or latest.closed
        expected: ExpectedVersion = ANY
        if check_version:
            expected = 0 if new_generation or latest is None else len(latest.events)
        if latest is not None and not new_generation and latest.key_destroyed:
            with pytest.raises(KeyUnavailableError):
                self.store.append(self.namespace, subject, batch, expected)
            return
        recorded = self.store.append(self.namespace, subject, batch, expected)
        if new_generation:
            latest = ModelStream(recorded[0].stream.stream_id, len(self.streams[subject]) + 1)
            self.streams[subject].append(latest)
        assert latest is not None
        for new, written in zip(batch, recorded, strict=True):
            assert written.version == len(latest.events) + 1
            assert written.stream.generation == latest.generation
            model = ModelEvent(
                written.event_id,
                subject,
                written.version,
                new.type,
                dict(new.data),
                dict(new.metadata),
                latest,
            )
            assert_reads_as(written, model)
            latest.events.append(model)
            self.events.append(model)

    @precondition(lambda self: self.events)
    @rule(data=st.data())
    def tombstone_one_event(self, data: st.DataObject) -> None:
        event = data.draw(st.sampled_from(self.events))
        with self.store.transaction() as tx:
            tombstones = tx.tombstone(event.stream.stream_id, [event.event_id], uuid.uuid4())
        expected = [] if event.tombstoned else [event.event_id]
        assert [t.event_id for t in tombstones] == expected
        event.tombstoned = True

    @rule(subject=subjects)
    def tombstone_latest_generation(self, subject: str) -> None:
        tombstones = self.store.tombstone(self.namespace, subject, None, uuid.uuid4())
        latest = self.latest(subject)
        pending = [] if latest is None else [e for e in latest.events if not e.tombstoned]
        assert [t.event_id for t in tombstones] == [e.event_id for e in pending]
        for event in pending:
            event.tombstoned = True

    @rule(subject=subjects)
    def destroy_data_key(self, subject: str) -> None:
        latest = self.latest(subject)
        if latest is None:
            assert self.store.destroy_data_key(self.namespace, subject) is None
        elif latest.key_destroyed:
            with pytest.raises(KeyUnavailableError):
                self.store.destroy_data_key(self.namespace, subject)
        else:
            assert self.store.destroy_data_key(self.namespace, subject) is not None
            latest.key_destroyed = True

    @rule(subject=subjects)
    def close_generation(self, subject: str) -> None:
        latest = self.latest(subject)
        with self.store.transaction() as tx:
            stream = tx.lock_stream(Subject(self.namespace, subject))
            ref = None if stream is None else stream.ref
            if ref is not None:
                tx.close_stream(ref.stream_id)
        if latest is None:
            assert ref is None
        else:
            assert ref is not None
            assert ref.stream_id == latest.stream_id
            latest.closed = True

    @precondition(lambda self: self.events)
    @rule(data=st.data())
    def reappend_an_existing_event(self, data: st.DataObject) -> None:
        event = data.draw(st.sampled_from(self.events))
        again = NewEvent(event.type, event.data, event.metadata, event_id=event.event_id)
        latest = self.latest(event.subject)
        if event.erasure is not None:
            with pytest.raises(EventErasedError):
                self.store.append(self.namespace, event.subject, [again])
        elif event.stream is not latest or event.stream.closed:
            with pytest.raises(DuplicateEventError):
                self.store.append(self.namespace, event.subject, [again])
        else:
            [replayed] = self.store.append(self.namespace, event.subject, [again])
            assert_reads_as(replayed, event)

    # -- what must hold after every step ---------------------------------------------

    @invariant()
    def log_verifies_and_reads_back(self) -> None:
        report = self.store.verify()
        assert report.ok, report.first_break
        assert (report.streams_checked, report.events_checked) == (
            sum(map(len, self.streams.values())),
            len(self.events),
        )
        for subject in SUBJECTS:
            self.check_current_generation(subject)
        by_id = {e.event_id: e for e in self.events}
        read = self.store.get_events(list(by_id))
        assert [e.event_id for e in read] == [e.event_id for e in self.events]
        for event in read:
            assert_reads_as(event, by_id[event.event_id])

    def check_current_generation(self, subject: str, *, backwards: bool = False) -> None:
        latest = self.latest(subject)
        expected = [] if latest is None else latest.events
        read = self.store.read_stream(self.namespace, subject, backwards=backwards)
        if backwards:
            read.reverse()
        assert [e.event_id for e in read] == [e.event_id for e in expected]
        for event, model in zip(read, expected, strict=True):
            assert_reads_as(event, model)
        head = self.store.head(self.namespace, subject)
        if latest is None:
            assert head is None
            return
        assert head is not None
        assert (head.version, head.stream.generation) == (len(latest.events), latest.generation)
        assert (head.closed_at is not None, head.key_destroyed_at is not None) == (
            latest.closed,
            latest.key_destroyed,
        )

    def teardown(self) -> None:
        try:
            for subject in SUBJECTS:
                report = self.store.verify(self.namespace, subject)
                assert report.ok, report.first_break
                assert report.streams_checked == len(self.streams[subject])
                self.check_current_generation(subject, backwards=True)
            log = read_whole_log(self.store)
            assert [e.event_id for e in log] == [e.event_id for e in self.events]
        finally:
            self._resources.close()


def read_whole_log(store: EventStore) -> list[RecordedEvent]:
    read: list[RecordedEvent] = []
    after = START
    while True:
        page = store.read_all(after, limit=50)
        if not page.events:
            return read
        read += page.events
        after = page.next_cursor


def test_any_sequence_of_operations_keeps_the_chain_verifying(stores: StoreFactory) -> None:
    machine = type("BoundLogMachine", (LogMachine,), {"stores": stores})
    run_state_machine_as_test(
        machine, settings=settings(max_examples=25, stateful_step_count=10, deadline=None)
    )


# -- b. any single change to a stored row is detected -------------------------------

# Columns the chain protects.  ``position`` is deliberately absent: positions are
# assigned by the database and are not hashed, so moving an event to another free
# position that keeps the order of its stream (say, the last event further up) goes
# unnoticed by verify; only a change that breaks version order is detected (see the
# test after this one).  ``commit_group``, ``erased_at`` and ``erasure_request_id``
# are not covered either: the first is a position too, the others are written after
# the fact by erasure (the audit stream records erasures).
EVENT_COLUMNS = (
    "event_id",
    "version",
    "type",
    "schema_version",
    "recorded_at",
    "payload",
    "digest",
    "chain_hash",
)
STREAM_COLUMNS = ("version", "chain_hash")
_REPLACEMENT_CHARS = "abcXYZ019._:-"


@dataclass(frozen=True)
class Target:
    """One stored value to tamper with."""

    event: RecordedEvent  # the event row, or the event whose stream row it is
    table: sa.Table
    key: sa.ColumnElement[bool]  # selects the row
    column: str
    original: Any

    @property
    def in_event_row(self) -> bool:
        return self.table is events


def changed(value: Any, data: st.DataObject) -> Any:
    """``value`` changed by one byte, one unit, one character or one hex digit."""
    if isinstance(value, bytes):
        index = data.draw(st.integers(0, len(value) - 1), label="byte")
        bit = data.draw(st.integers(0, 7), label="bit")
        return value[:index] + bytes([value[index] ^ (1 << bit)]) + value[index + 1 :]
    if isinstance(value, uuid.UUID):
        digits = value.hex
        index = data.draw(st.integers(0, 31), label="hex digit")
        flip = data.draw(st.integers(1, 15), label="xor")
        digit = format(int(digits[index], 16) ^ flip, "x")
        return uuid.UUID(digits[:index] + digit + digits[index + 1 :])
    if isinstance(value, datetime):
        return value + timedelta(microseconds=1)
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        index = data.draw(st.integers(0, len(value) - 1), label="char")
        other = data.draw(st.sampled_from([c for c in _REPLACEMENT_CHARS if c != value[index]]))
        return value[:index] + other + value[index + 1 :]
    raise AssertionError(f"no way to change a {type(value).__name__}")


def write_value(store: EventStore, target: Target, value: Any) -> None:
    with store.backend.write_connection() as conn, conn.begin():
        updated = conn.execute(
            target.table.update().where(target.key).values({target.column: value})
        )
        assert updated.rowcount == 1


def free_version(store: EventStore, stream_id: int, version: int) -> int:
    """``version + 1``, or past the head when that version is taken (it is unique)."""
    with store.backend.read_connection() as conn:
        head = conn.execute(
            sa.select(sa.func.max(events.c.version)).where(events.c.stream_id == stream_id)
        ).scalar_one()
    return version + 1 if version == head else int(head) + 1


def fill_log(store: EventStore, data: st.DataObject) -> tuple[list[RecordedEvent], set[int]]:
    """A few appends to a few subjects; some events (never all) then tombstoned."""
    written: list[RecordedEvent] = []
    appends = data.draw(st.lists(st.tuples(subjects, st.integers(1, 4)), min_size=1, max_size=4))
    for subject, size in appends:
        batch = [NewEvent("memory.stored", {"n": i}, {"by": "test"}) for i in range(size)]
        written += store.append("default", subject, batch)
    erased = data.draw(
        st.sets(st.integers(0, len(written) - 1), max_size=min(2, len(written) - 1)),
        label="tombstoned",
    )
    with store.transaction() as tx:
        for index in erased:
            tx.tombstone(written[index].stream.stream_id, [written[index].event_id], uuid.uuid4())
    return written, erased


def draw_target(store: EventStore, table: sa.Table, column: str, data: st.DataObject) -> Target:
    written, erased = fill_log(store, data)
    # A tombstone has no payload (data and metadata sealed together) left to change.
    candidates = [i for i in range(len(written)) if column != "payload" or i not in erased]
    index = data.draw(st.sampled_from(candidates), label="event")
    label_example(f"target is {'a tombstone' if index in erased else 'live'}")
    chosen = written[index]
    key = (
        events.c.position == chosen.position
        if table is events
        else streams.c.stream_id == chosen.stream.stream_id
    )
    with store.backend.read_connection() as conn:
        original = conn.execute(sa.select(table.c[column]).where(key)).scalar_one()
    return Target(chosen, table, key, column, original)


@pytest.mark.parametrize(
    ("table", "column"),
    [(events, c) for c in EVENT_COLUMNS] + [(streams, c) for c in STREAM_COLUMNS],
    ids=[f"events.{c}" for c in EVENT_COLUMNS] + [f"streams.{c}" for c in STREAM_COLUMNS],
)
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_any_single_change_to_a_stored_row_is_detected(
    stores: StoreFactory, table: sa.Table, column: str, data: st.DataObject
) -> None:
    with stores.open() as store:
        target = draw_target(store, table, column, data)
        if target.in_event_row and column == "version":
            new_value: Any = free_version(store, target.event.stream.stream_id, target.original)
        else:
            new_value = changed(target.original, data)
        assert new_value != target.original
        assert store.verify().ok
        write_value(store, target, new_value)
        assert_break_at(store.verify().first_break, target)


def assert_break_at(brk: ChainBreak | None, target: Target) -> None:
    assert brk is not None, f"changing {target.table.name}.{target.column} went unnoticed"
    assert brk.stream_id == target.event.stream.stream_id, brk
    if target.in_event_row:
        assert brk.version == target.event.version, brk
    else:
        assert brk.event_id is None, brk
        assert "head" in brk.reason, brk


def test_positions_out_of_version_order_are_detected(sqlite_store: EventStore) -> None:
    first, _, last = sqlite_store.append(
        "default", "alice", [NewEvent("memory.stored", {"n": n}) for n in range(3)]
    )
    with sqlite_store.backend.write_connection() as conn, conn.begin():
        conn.execute(
            events.update()
            .where(events.c.position == first.position)
            .values(position=last.position + 1000)
        )
    brk = sqlite_store.verify().first_break
    assert brk is not None
    assert (brk.stream_id, brk.version) == (first.stream.stream_id, 2)
    assert "positions" in brk.reason


# -- what a change the chain cannot hash must still do --------------------------------


@pytest.mark.parametrize("schema_version", [-1, 2**32])
def test_out_of_range_values_are_reported_as_a_break_not_raised(
    sqlite_store: EventStore, schema_version: int
) -> None:
    # The chain packs schema_version as an unsigned 32-bit integer; a stored value
    # outside that range must make verify name the row, not crash the walk (and
    # with it `oblivio verify-log`).
    _, second = sqlite_store.append(
        "default", "alice", [NewEvent("memory.stored", {"n": n}) for n in range(2)]
    )
    with sqlite_store.backend.write_connection() as conn, conn.begin():
        conn.execute(
            events.update()
            .where(events.c.position == second.position)
            .values(schema_version=schema_version)
        )
    brk = sqlite_store.verify().first_break
    assert brk is not None
    assert (brk.stream_id, brk.version) == (second.stream.stream_id, 2)


def test_a_stream_moved_to_another_subject_is_detected(sqlite_store: EventStore) -> None:
    # Nothing in the chain names the subject a stream belongs to: each stream's
    # chain starts from the same genesis value, and the AAD binds ciphertext to
    # the stream id only.  Swapping the subject keys of two stream rows leaves
    # every hash intact, and alice's reads then return bob's events.
    [alice] = sqlite_store.append("default", "alice", [NewEvent("memory.stored", {"who": "a"})])
    [bob] = sqlite_store.append("default", "bob", [NewEvent("memory.stored", {"who": "b"})])
    moves = [
        (alice, bytes(32)),  # out of the way of the unique (namespace, subject) key
        (bob, alice.stream.subject_key),
        (alice, bob.stream.subject_key),
    ]
    with sqlite_store.backend.write_connection() as conn, conn.begin():
        for event, subject_key in moves:
            for table in (streams, stream_directory):
                conn.execute(
                    table.update()
                    .where(table.c.stream_id == event.stream.stream_id)
                    .values(subject_key=subject_key)
                )
    assert [e.data for e in sqlite_store.read_stream("default", "alice")] == [{"who": "b"}]
    assert not sqlite_store.verify().ok, "alice now reads bob's events and the chain verifies"


def test_a_directory_entry_moved_to_another_subject_is_detected(sqlite_store: EventStore) -> None:
    # A subject's stream is looked up in the directory: moving only its entries there
    # leaves every stream row and hash as it was, and alice's reads return bob's events.
    [alice] = sqlite_store.append("default", "alice", [NewEvent("memory.stored", {"who": "a"})])
    [bob] = sqlite_store.append("default", "bob", [NewEvent("memory.stored", {"who": "b"})])
    moves = [
        (alice, bytes(32)),  # out of the way of the unique (namespace, subject) key
        (bob, alice.stream.subject_key),
        (alice, bob.stream.subject_key),
    ]
    with sqlite_store.backend.write_connection() as conn, conn.begin():
        for event, subject_key in moves:
            conn.execute(
                stream_directory.update()
                .where(stream_directory.c.stream_id == event.stream.stream_id)
                .values(subject_key=subject_key)
            )
    assert [e.data for e in sqlite_store.read_stream("default", "alice")] == [{"who": "b"}]
    brk = sqlite_store.verify().first_break
    assert brk is not None
    assert brk.reason == "stream directory does not match the stream"
