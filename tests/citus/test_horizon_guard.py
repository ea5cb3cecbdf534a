"""The failed-COMMIT-PREPARED guard asks the workers over connections it keeps.

Under continuous writes log pages have 2PC records above the reader (every
append that creates a subject's stream generation leaves one: the directory on
the coordinator and the stream's shard), so the horizon asks the workers they name whether
each part is still prepared (tests/citus/test_failed_commit_prepared.py shows
why it must).  Each process keeps one connection per worker for it: a new one
per ask cost the worker a backend's start on every page.  These tests watch the
workers' ``pg_stat_activity``: one backend per worker serves page after page,
a dropped one is replaced, and a worker that cannot be reached fails the read
with the retryable error instead of letting it pass.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import pytest

from eventstore import START, EventStore, KeyringFile, LogCursor, NewEvent, create_backend
from eventstore.backends.citus_prepared import APPLICATION_NAME, PreparedOnWorkers, Worker
from eventstore.errors import OperationalError
from oblivio_bench.citus import HOST, CitusCluster, Node
from tests.citus.test_failed_commit_prepared import recovery_paused

pytestmark = pytest.mark.citus

NAMESPACE = "ns"
SUBJECTS_PER_ROUND = 8
_rounds = itertools.count()


def new_subjects() -> list[str]:
    """Subjects never written: an append to an existing stream commits on its one
    shard, without 2PC records; creating a stream leaves one on its worker."""
    n = next(_rounds)
    return [f"person-{n}-{i}" for i in range(SUBJECTS_PER_ROUND)]


def guard_backends(worker: Node, database: str) -> set[int]:
    """The pids of the guard's connections to ``worker`` in ``database``."""
    with psycopg.connect(worker.url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
            (database, APPLICATION_NAME),
        )
        return {pid for (pid,) in rows}


def worker_of(citus: CitusCluster, url: str, stream_id: int) -> Node:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT n.nodeport FROM pg_dist_placement p JOIN pg_dist_node n USING (groupid)"
            " WHERE p.shardid = get_shard_id_for_distribution_column('events', %s)",
            (stream_id,),
        ).fetchone()
    assert row is not None
    return next(w for w in citus.workers if w.port == row[0])


def write_and_read(store: EventStore, after: LogCursor) -> tuple[LogCursor, list[str]]:
    """An append to new subjects (2PC records on both workers), then the log read up
    to them: the pages' horizons ask both workers about those records; the subjects."""
    subjects = new_subjects()
    for subject in subjects:
        store.append(NAMESPACE, subject, [NewEvent("noted", {})])
    while True:
        page = store.read_all(after, 3)
        if not page.events:
            return after, subjects
        after = page.next_cursor


@contextmanager
def a_store(url: str, keyring: KeyringFile) -> Iterator[EventStore]:
    store = EventStore(create_backend(url), keyring)
    try:
        yield store
    finally:
        store.close()


def test_one_kept_connection_per_worker_serves_every_page(
    citus: CitusCluster, citus_url: str, keyring: KeyringFile
) -> None:
    database = citus_url.rsplit("/", 1)[1]
    # Backends of stores other tests of this process left open are not this store's.
    before = {w.port: guard_backends(w, database) for w in citus.workers}
    with recovery_paused(citus_url), a_store(citus_url, keyring) as store:
        cursor, subjects = write_and_read(store, START)
        streams = [store.read_stream(NAMESPACE, s)[0].stream.stream_id for s in subjects]
        assert {worker_of(citus, citus_url, s).port for s in streams} == {
            w.port for w in citus.workers
        }  # the records name both workers
        kept = {w.port: guard_backends(w, database) - before[w.port] for w in citus.workers}
        assert all(len(pids) == 1 for pids in kept.values()), kept
        for _ in range(4):
            cursor, _ = write_and_read(store, cursor)
            now = {w.port: guard_backends(w, database) - before[w.port] for w in citus.workers}
            assert now == kept  # the same backend on each worker, page after page
    closed = {w.port: guard_backends(w, database) - before[w.port] for w in citus.workers}
    assert closed == {w.port: set() for w in citus.workers}  # closed with the store


@dataclass
class Guarded:
    """A store that has read the log past 2PC records on both workers (recovery paused,
    so the records stay, as under continuous writes)."""

    store: EventStore
    worker: Node
    database: str
    others: set[int]  # guard connections to the worker that are not this store's
    cursor: LogCursor

    def kept(self) -> int:
        """The pid of the store's kept connection to the worker."""
        (pid,) = guard_backends(self.worker, self.database) - self.others
        return pid

    def terminate(self, pid: int) -> None:
        with psycopg.connect(self.worker.url(), autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s::int)", (pid,))


@pytest.fixture
def guarded(citus: CitusCluster, citus_url: str, keyring: KeyringFile) -> Iterator[Guarded]:
    database = citus_url.rsplit("/", 1)[1]
    worker = citus.workers[0]
    others = guard_backends(worker, database)
    with recovery_paused(citus_url), a_store(citus_url, keyring) as store:
        yield Guarded(store, worker, database, others, write_and_read(store, START)[0])


def test_a_dropped_connection_is_opened_again(guarded: Guarded) -> None:
    first = guarded.kept()
    guarded.terminate(first)
    before = len(guarded.store.read_all(START, 1000).events)
    write_and_read(guarded.store, guarded.cursor)  # no error: the stale one is replaced
    assert len(guarded.store.read_all(START, 1000).events) == before + SUBJECTS_PER_ROUND
    assert guarded.kept() != first


def test_a_worker_that_does_not_answer_fails_the_read(guarded: Guarded) -> None:
    store, database = guarded.store, guarded.database
    for subject in new_subjects():
        store.append(NAMESPACE, subject, [NewEvent("noted", {})])
    with psycopg.connect(guarded.worker.url(), autocommit=True) as admin:
        # The worker refuses every new connection to the database, and the kept one goes.
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false'.encode())
        try:
            guarded.terminate(guarded.kept())
            with pytest.raises(OperationalError, match="did not answer"):
                store.read_all(guarded.cursor, 100)
        finally:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true'.encode())
    assert len(store.read_all(guarded.cursor, 100).events) == SUBJECTS_PER_ROUND  # answered again


def test_a_name_that_reaches_another_node_is_not_asked(citus: CitusCluster, citus_url: str) -> None:
    """A name in ``pg_dist_node`` that reaches another server from oblivio's host would
    answer "not prepared" for gids it never held: a connection must show that it
    reached the node of the records' group before it is asked."""
    with psycopg.connect(citus_url, autocommit=True) as conn:
        group_of = dict(conn.execute("SELECT nodeport, groupid FROM pg_dist_node").fetchall())
    first, second = citus.workers
    asker = PreparedOnWorkers(citus_url)
    try:
        assert asker.still_prepared(Worker(HOST, first.port, group_of[first.port]), ["x"]) == set()
        # The first worker's group, reached at the second worker's address.
        misdirected = Worker(HOST, second.port, group_of[first.port])
        with pytest.raises(OperationalError, match="not the node of group"):
            asker.still_prepared(misdirected, ["x"])
    finally:
        asker.close()
