"""Many writers at once on PostgreSQL: global order, stream versions, late commits.

The PostgreSQL backend orders the log by ``(commit_group, position)`` and
delivers only rows below the oldest running transaction id (see
:mod:`eventstore.backends.postgres`).  These tests attack that from the outside: real
writer processes and a reader that follows the log while they run, optimistic
appenders racing on one stream, and a transaction held open on purpose so a
committed event with a larger position is visible before it.  The last test
is about processes sharing one keyring file (it needs no database, but runs
with the rest of the multi-process tests).
"""

from __future__ import annotations

import contextlib
import functools
import json
import subprocess
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from eventstore import (
    START,
    EventStore,
    KeyringFile,
    LogCursor,
    NewEvent,
    RecordedEvent,
    Subject,
    WrongExpectedVersionError,
    create_backend,
    keys,
)
from eventstore.backends.postgres import normalise_postgres_url
from eventstore.schema import events
from tests.eventstore import _writer

pytestmark = pytest.mark.postgres

NAMESPACE = _writer.NAMESPACE
WRITERS = 4
EVENTS_PER_WRITER = 1_500
# On the Citus tier every append is a two-phase commit across two nodes of one
# loaded machine; fewer events keep the tier within its few minutes
# (benchmarks/citus_followers.py runs the 5,000 and more).
CITUS_EVENTS_PER_WRITER = 250
SUBJECTS = [f"subject-{i}" for i in range(6)]
PAGE = 200
POLL_INTERVAL = 0.02  # seconds between polls when a page came back short
FOLLOW_TIMEOUT = 240.0  # ~20 s on an idle 2-core machine; a hang must still end
CATCH_UP_TIMEOUT = 30.0  # a transaction of this database may hold delivery back


@pytest.fixture
def server_url(request: pytest.FixtureRequest) -> str:
    """A fresh database: on the PostgreSQL server, or on the Citus tier's cluster when a
    test is parametrized with ``ON_BOTH``."""
    url: str = request.getfixturevalue(f"{getattr(request, 'param', 'postgres')}_url")
    return url


#: The same outside checks on one PostgreSQL server and on a Citus cluster.
ON_BOTH = pytest.mark.parametrize(
    "server_url", ["postgres", pytest.param("citus", marks=pytest.mark.citus)], indirect=True
)


@pytest.fixture
def pg_store(server_url: str, keyring: KeyringFile) -> Iterator[EventStore]:
    store = EventStore(create_backend(server_url), keyring)
    yield store
    store.close()


# -- helpers --------------------------------------------------------------------


@dataclass
class Follower:
    """Follows the global order page by page, checking every delivery."""

    store: EventStore
    cursor: LogCursor = START
    delivered: list[RecordedEvent] = field(default_factory=list)
    seen: set[uuid.UUID] = field(default_factory=set)

    def poll(self, limit: int = PAGE) -> int:
        page = self.store.read_all(self.cursor, limit=limit)
        for event in page.events:
            assert event.event_id not in self.seen, f"{event.event_id} delivered twice"
            assert event.cursor > self.cursor, f"cursor went back: {self.cursor} -> {event.cursor}"
            self.seen.add(event.event_id)
            self.delivered.append(event)
            self.cursor = event.cursor
        assert page.next_cursor == self.cursor
        return len(page.events)

    def drain(self) -> None:
        while self.poll():
            pass

    def catch_up(self, expected: set[uuid.UUID], timeout: float = CATCH_UP_TIMEOUT) -> None:
        """Poll until every expected event was delivered.

        Delivery may lag while a transaction of this database (autovacuum's
        ANALYZE takes an xid) is older than the events: that is the documented
        price of the horizon, so this waits for it instead of failing at once.
        """
        deadline = time.monotonic() + timeout
        while not expected <= self.seen:
            assert time.monotonic() < deadline, (
                f"{len(expected - self.seen)} of {len(expected)} events never delivered"
            )
            if self.poll() < PAGE:
                time.sleep(POLL_INTERVAL)
        self.drain()


def read_whole_log(store: EventStore) -> list[RecordedEvent]:
    """The whole log in global order, read afresh from the start."""
    follower = Follower(store)
    follower.drain()
    return follower.delivered


def stream_versions(store: EventStore) -> dict[int, list[int]]:
    """Every stored (stream_id, version), grouped by stream, in version order."""
    with store.backend.read_connection() as conn:
        rows = conn.execute(
            sa.select(events.c.stream_id, events.c.version).order_by(
                events.c.stream_id, events.c.version
            )
        ).all()
    by_stream: dict[int, list[int]] = defaultdict(list)
    for stream_id, version in rows:
        by_stream[stream_id].append(version)
    return by_stream


def assert_contiguous(by_stream: dict[Any, list[int]]) -> None:
    for stream, versions in by_stream.items():
        assert sorted(versions) == list(range(1, len(versions) + 1)), (
            f"stream {stream}: versions are not 1..n without duplicates"
        )


class Worker(threading.Thread):
    """A daemon thread that keeps its failure for the test thread to re-raise."""

    def __init__(self, target: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.target()
        except BaseException as e:
            self.error = e

    def finish(self, deadline: float) -> None:
        self.join(max(0.0, deadline - time.monotonic()))
        assert not self.is_alive(), "a thread did not finish in time"
        if self.error is not None:
            raise self.error


def run_threads(target: Callable[[int], None], count: int, timeout: float) -> None:
    """Run ``target(i)`` in ``count`` threads; re-raise the first failure."""
    workers = [Worker(functools.partial(target, i)) for i in range(count)]
    for w in workers:
        w.start()
    deadline = time.monotonic() + timeout
    for w in workers:
        w.finish(deadline)


# -- a. writer processes and a following reader ----------------------------------------


def start_writers(
    url: str, keyring: KeyringFile, tmp_path: Path, count: int = EVENTS_PER_WRITER
) -> list[subprocess.Popen[bytes]]:
    procs = []
    for writer in range(WRITERS):
        procs.append(
            _writer.start(
                "burst",
                f"--url={url}",
                f"--keyring={keyring.path}",
                f"--writer={writer}",
                f"--subjects={','.join(SUBJECTS)}",
                f"--count={count}",
                f"--acks={tmp_path / f'acks-{writer}.jsonl'}",
                stderr_path=tmp_path / f"stderr-{writer}.txt",
            )
        )
    return procs


def load_acks(tmp_path: Path, count: int = EVENTS_PER_WRITER) -> list[dict[str, Any]]:
    acks: list[dict[str, Any]] = []
    for writer in range(WRITERS):
        lines = (tmp_path / f"acks-{writer}.jsonl").read_text().splitlines()
        assert len(lines) == count, f"writer {writer} acknowledged {len(lines)}"
        acks.extend(json.loads(line) for line in lines)
    return acks


def writer_failure(tmp_path: Path, procs: list[subprocess.Popen[bytes]]) -> str | None:
    for writer, proc in enumerate(procs):
        if proc.returncode not in (None, 0):
            stderr = (tmp_path / f"stderr-{writer}.txt").read_text()
            return f"writer {writer} exited with {proc.returncode}:\n{stderr[-3000:]}"
    return None


@ON_BOTH
def test_a_reader_following_live_writers_gets_every_event_once_in_order(
    server_url: str, keyring: KeyringFile, pg_store: EventStore, tmp_path: Path
) -> None:
    count = CITUS_EVENTS_PER_WRITER if pg_store.backend_name == "citus" else EVENTS_PER_WRITER
    started = time.monotonic()
    procs = start_writers(server_url, keyring, tmp_path, count)
    follower = Follower(pg_store)
    try:
        readers = [_writer.LineReader(p) for p in procs]
        for reader in readers:
            assert reader.read_lines(1, timeout=60) == ["ready"]
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()

        delivered_while_writing = nonempty_pages_while_writing = 0
        deadline = time.monotonic() + FOLLOW_TIMEOUT
        while any(p.poll() is None for p in procs):
            assert time.monotonic() < deadline, "writers did not finish in time"
            failure = writer_failure(tmp_path, procs)
            assert failure is None, failure
            got = follower.poll()
            if got:
                delivered_while_writing += got
                nonempty_pages_while_writing += 1
            if got < PAGE:
                time.sleep(POLL_INTERVAL)  # let the writers get ahead a little
        failure = writer_failure(tmp_path, procs)
        assert failure is None, failure
        for reader in readers:
            assert reader.read_lines(1, timeout=10) == ["done"]
    finally:
        for proc in procs:
            _writer.stop(proc)
    writing_time = time.monotonic() - started

    acks = load_acks(tmp_path, count)
    acked_ids = {uuid.UUID(a["id"]) for a in acks}
    assert len(acked_ids) == WRITERS * count

    # All writers have exited, so nothing of theirs is in flight: the follower
    # must reach every acknowledged event.
    follower.catch_up(acked_ids)

    # It followed while they wrote, not only at the end.
    assert nonempty_pages_while_writing >= 10
    assert delivered_while_writing >= PAGE

    # Every committed event exactly once, nothing that was not acknowledged.
    assert follower.seen == acked_ids
    assert len(follower.delivered) == len(acked_ids)

    # The order it saw while following is the log's order, read afresh now.
    whole_log = read_whole_log(pg_store)
    assert [e.event_id for e in whole_log] == [e.event_id for e in follower.delivered]
    cursors = [e.cursor for e in follower.delivered]
    assert cursors == sorted(cursors)
    assert len(set(cursors)) == len(cursors)

    # Streams: no (stream, version) twice, versions 1..n; the writers' own
    # acknowledgements agree with what is stored.
    by_stream = stream_versions(pg_store)
    assert sum(len(v) for v in by_stream.values()) == len(acked_ids)
    assert_contiguous(by_stream)
    acked_versions: dict[int, list[int]] = defaultdict(list)
    for ack in acks:
        acked_versions[ack["stream_id"]].append(ack["version"])
    assert_contiguous(acked_versions)
    assert {s: sorted(v) for s, v in acked_versions.items()} == by_stream
    assert len(by_stream) == len(SUBJECTS)
    assert pg_store.verify().ok

    print(
        f"\n{len(acked_ids)} events by {WRITERS} processes in {writing_time:.1f}s; "
        f"{delivered_while_writing} delivered while writing "
        f"in {nonempty_pages_while_writing} pages"
    )


# -- b. optimistic appenders on one stream ----------------------------------------------


def head_version(store: EventStore, subject: str) -> int:
    head = store.head(NAMESPACE, subject)
    return 0 if head is None else head.version


@ON_BOTH
def test_b_lockstep_rounds_on_one_stream_have_exactly_one_winner(pg_store: EventStore) -> None:
    """Every round all threads read the same head and append at it: one wins, the rest lose."""
    threads, rounds = 4, 40
    barrier = threading.Barrier(threads, timeout=30)
    wins: dict[int, list[tuple[int, uuid.UUID]]] = defaultdict(list)  # round -> winners
    losses: dict[int, int] = defaultdict(int)
    refusals: list[tuple[int, int, int]] = []  # (error.expected, error.actual, head read)
    lock = threading.Lock()

    def contend(worker: int) -> None:
        try:
            play_rounds(worker)
        except BaseException:
            barrier.abort()  # release the others at once instead of at the timeout
            raise

    def play_rounds(worker: int) -> None:
        for r in range(rounds):
            expected = head_version(pg_store, "one-stream")
            barrier.wait()  # everyone has read the head before anyone appends
            event = NewEvent("test.race", {"worker": worker, "round": r})
            try:
                [recorded] = pg_store.append(NAMESPACE, "one-stream", [event], expected)
            except WrongExpectedVersionError as e:
                with lock:
                    losses[r] += 1
                    refusals.append((e.expected, e.actual, expected))
            else:
                assert recorded.version == expected + 1
                with lock:
                    wins[r].append((recorded.version, recorded.event_id))
            barrier.wait()  # the round is over for everyone

    run_threads(contend, threads, timeout=120)

    assert {r: len(w) for r, w in wins.items()} == dict.fromkeys(range(rounds), 1)
    assert dict(losses) == dict.fromkeys(range(rounds), threads - 1)
    assert all((exp, act) == (read, read + 1) for exp, act, read in refusals), refusals
    stored = pg_store.read_stream(NAMESPACE, "one-stream")
    assert [(e.version, e.event_id) for e in stored] == [wins[r][0] for r in range(rounds)]
    assert pg_store.verify().ok


@ON_BOTH
def test_b_free_running_optimistic_appenders_get_each_version_once(
    pg_store: EventStore,
) -> None:
    """Read head, append at it, retry on conflict: N successes make versions 1..N."""
    threads, wins_each = 4, 30
    won: list[tuple[int, uuid.UUID]] = []
    conflicts = [0]
    lock = threading.Lock()

    def append_until_won(worker: int) -> None:
        for n in range(wins_each):
            for _attempt in range(1_000):
                expected = head_version(pg_store, "shared")
                event = NewEvent("test.race", {"worker": worker, "n": n})
                try:
                    [recorded] = pg_store.append(NAMESPACE, "shared", [event], expected)
                except WrongExpectedVersionError:
                    with lock:
                        conflicts[0] += 1
                    continue
                assert recorded.version == expected + 1
                with lock:
                    won.append((recorded.version, recorded.event_id))
                break
            else:
                raise AssertionError("never won the stream in 1000 attempts")

    run_threads(append_until_won, threads, timeout=120)

    total = threads * wins_each
    assert sorted(v for v, _ in won) == list(range(1, total + 1))
    stored = pg_store.read_stream(NAMESPACE, "shared")
    assert [(e.version, e.event_id) for e in stored] == sorted(won)
    assert_contiguous(stream_versions(pg_store))
    assert pg_store.verify().ok
    print(f"\n{total} versions, {conflicts[0]} conflicts retried")


# -- c. a late commit is not skipped ------------------------------------------------------


def naive_read(store: EventStore, after: int) -> list[tuple[int, uuid.UUID]]:
    """What a reader ordering only by position would deliver after ``after``."""
    with store.backend.read_connection() as conn:
        rows = conn.execute(
            sa.select(events.c.position, events.c.event_id)
            .where(events.c.position > after)
            .order_by(events.c.position)
        ).all()
    return [(row.position, row.event_id) for row in rows]


@dataclass
class NaiveFollower:
    store: EventStore
    position: int = 0
    delivered: list[uuid.UUID] = field(default_factory=list)

    def poll(self) -> None:
        for position, event_id in naive_read(self.store, self.position):
            self.delivered.append(event_id)
            self.position = position


@contextmanager
def open_transaction(
    store: EventStore, subject: str, after_release: bool = False
) -> Iterator[list[RecordedEvent]]:
    """A transaction in another thread that appends to ``subject`` and stays open, not
    committed, for the block (and appends again before committing if ``after_release``).
    Yields the events it appended, filled in as it appends them."""
    appended, release = threading.Event(), threading.Event()
    slow: list[RecordedEvent] = []

    def slow_writer() -> None:
        with store.transaction() as tx:
            stream = tx.lock_stream(Subject(NAMESPACE, subject), create=True)
            slow.extend(tx.append_locked(stream, [NewEvent("test.slow", {"n": 0})]))
            appended.set()
            assert release.wait(timeout=60), "never released"
            if after_release:
                stream = tx.lock_stream(Subject(NAMESPACE, subject), create=True)
                slow.extend(tx.append_locked(stream, [NewEvent("test.slow", {"n": 1})]))

    thread = Worker(slow_writer)
    thread.start()
    try:
        assert appended.wait(timeout=30), "the slow transaction did not append"
        yield slow
    finally:
        release.set()
        thread.finish(time.monotonic() + 60)


@ON_BOTH
def test_c_an_event_committed_late_is_not_skipped(pg_store: EventStore) -> None:
    safe, naive = Follower(pg_store), NaiveFollower(pg_store)
    with open_transaction(pg_store, "slow-subject") as slow:
        # The slow event holds a smaller position but is not committed yet;
        # another writer now commits an event with a larger position.
        [fast] = pg_store.append(NAMESPACE, "fast-subject", [NewEvent("test.fast", {"n": 2})])
        [slow_event] = slow
        assert slow_event.position < fast.position

        safe.drain()
        naive.poll()
        assert naive.delivered == [fast.event_id]  # the naive reader has moved past the gap

    safe.catch_up({slow_event.event_id, fast.event_id})
    naive.poll()

    # The naive reader lost the late commit for good: the test can fail.
    assert slow_event.event_id not in naive.delivered
    # The real reader got both, each once, in the log's own order.
    assert safe.seen == {slow_event.event_id, fast.event_id}
    whole_log = read_whole_log(pg_store)
    assert [e.event_id for e in safe.delivered] == [e.event_id for e in whole_log]


@ON_BOTH
def test_c_held_back_events_are_delivered_once_the_late_commit_lands(
    pg_store: EventStore,
) -> None:
    """Many writers commit around one open transaction; nothing behind it is lost."""
    follower, naive = Follower(pg_store), NaiveFollower(pg_store)
    fast: list[RecordedEvent] = []
    with open_transaction(pg_store, "slow", after_release=True) as slow:
        for n in range(50):
            fast += pg_store.append(NAMESPACE, f"fast-{n % 5}", [NewEvent("test.fast", {"n": n})])
            follower.poll(limit=7)
            naive.poll()
    everything = {e.event_id for e in slow + fast}
    follower.catch_up(everything)
    naive.poll()

    assert follower.seen == everything
    assert [e.event_id for e in follower.delivered] == [
        e.event_id for e in read_whole_log(pg_store)
    ]
    assert slow[0].event_id not in naive.delivered  # the gap a position-only reader falls into


# -- d. the horizon is this database's --------------------------------------------------


def server_wide_xmin(store: EventStore) -> int:
    """The oldest transaction running anywhere on the server (the old horizon)."""
    with store.backend.statement_reads() as conn:
        query = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
        return int(conn.exec_driver_sql(query).scalar_one())


@contextmanager
def open_transaction_with_an_xid(url: str) -> Iterator[int]:
    """A transaction on the database of ``url`` that has taken a transaction id
    (as any write does) and stays open for the block; yields the id."""
    engine = sa.create_engine(normalise_postgres_url(url))
    try:
        with engine.connect() as conn:
            query = "SELECT pg_current_xact_id()::text::bigint"
            yield int(conn.exec_driver_sql(query).scalar_one())
            conn.rollback()
    finally:
        engine.dispose()


def test_d_a_transaction_open_in_another_database_does_not_hold_delivery_back(
    pg_store: EventStore, postgres_server_url: str
) -> None:
    follower = Follower(pg_store)
    with open_transaction_with_an_xid(postgres_server_url) as foreign:
        [event] = pg_store.append(NAMESPACE, "subject", [NewEvent("test.now", {"n": 1})])
        # The premise: the server-wide horizon is held at or below the foreign
        # transaction, which is older than the event.
        assert server_wide_xmin(pg_store) <= foreign < event.commit_group
        # The foreign transaction stays open: only a horizon that ignores it
        # ever delivers the event (other transactions of this database may
        # delay it a little, so this waits rather than reads once).
        follower.catch_up({event.event_id})
        assert pg_store.log_head() == event.cursor
        assert pg_store.count_after(START) == 1


def test_d_a_transaction_of_this_database_holds_delivery_back_before_it_writes(
    pg_store: EventStore,
) -> None:
    """A writer that took its transaction id before its first append (as one that
    creates a stream or locks a row first does) must hold back every later
    commit, or its append would land behind what was delivered."""
    follower = Follower(pg_store)
    with pg_store.transaction() as slow:
        slow.connection.exec_driver_sql("SELECT pg_current_xact_id()")
        [fast] = pg_store.append(NAMESPACE, "fast", [NewEvent("test.fast", {"n": 1})])
        follower.drain()
        assert follower.delivered == []
        assert pg_store.log_head() == START
        assert pg_store.count_after(START) == 0
        stream = slow.lock_stream(Subject(NAMESPACE, "slow"), create=True)
        [late] = slow.append_locked(stream, [NewEvent("test.slow", {"n": 0})])
    assert late.cursor < fast.cursor  # it commits last but sorts first
    follower.catch_up({late.event_id, fast.event_id})
    assert [e.event_id for e in follower.delivered] == [late.event_id, fast.event_id]


# -- processes sharing one keyring file --------------------------------------------------


def test_openers_racing_to_create_a_keyring_agree_on_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two openers of a keyring that does not exist yet must end up with the same keys.

    Both find no file and create keys.  Had the second one *replaced* the
    first one's file (as ``KeyringFile`` first did), the first would already
    have loaded its own keys and go on writing under a subject HMAC key and a
    KEK that exist nowhere on disk.  Threads stand in for processes here, with
    the interleaving forced: both create, the first writes and loads, then the
    second writes.
    """
    path = tmp_path / "keyring.json"
    real_write = keys._write_private
    both_creating = threading.Barrier(2, timeout=5)
    first_loaded = threading.Event()
    lock = threading.Lock()
    write_order: dict[int, int] = {}

    def racing_write(target: Path, content: bytes, **options: bool) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            both_creating.wait()  # both openers have found no keyring
        with lock:
            me = write_order[threading.get_ident()] = len(write_order)
        if me > 0:
            first_loaded.wait(timeout=5)  # let the first opener load what it wrote
        real_write(target, content, **options)

    monkeypatch.setattr(keys, "_write_private", racing_write)
    opened: dict[int, KeyringFile] = {}

    def open_keyring(i: int) -> None:
        opened[i] = KeyringFile(path)
        if write_order.get(threading.get_ident()) == 0:
            first_loaded.set()

    run_threads(open_keyring, 2, timeout=30)
    monkeypatch.undo()

    on_disk = KeyringFile(path)
    for ring in opened.values():
        assert ring.subject_hmac_key() == on_disk.subject_hmac_key()
        assert ring.kek(ring.active_kek_version) == on_disk.kek(on_disk.active_kek_version)
