"""A COMMIT PREPARED that failed: the horizon holds at its commit group until 2PC recovery.

Every append commits with two-phase commit (the coordinator's stream row and a
worker's shard).  When a worker goes away between the coordinator's commit and
its own COMMIT PREPARED, Citus leaves what this test builds by hand: the
coordinator transaction committed, its record (worker group, gid) in
``pg_dist_transaction``, and the event rows in a transaction still prepared on
the worker, which 2PC recovery (``recover_prepared_transactions()``) commits
later, after the writer has released its locks.  A reader must not pass that
commit group meanwhile, or the rows land behind its cursor for ever; and only
that gid may hold it, not the records Citus keeps of 2PC commits that went well.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from eventstore import (
    START,
    EventStore,
    KeyringFile,
    LogCursor,
    NewEvent,
    RecordedEvent,
    create_backend,
)
from oblivio_bench.citus import CitusCluster

pytestmark = pytest.mark.citus

NAMESPACE = "ns"
# The gid Citus would give a worker part: citus_<initiator group>_<pid>_<transaction>_<conn>.
GID = "citus_0_4242_4242_1"


@contextmanager
def recovery_paused(coordinator_url: str) -> Iterator[None]:
    """No 2PC recovery by the maintenance daemon until the test runs it itself."""
    with psycopg.connect(coordinator_url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET citus.recover_2pc_interval = -1")
        conn.execute("SELECT pg_reload_conf()")
        try:
            yield
        finally:
            conn.execute("ALTER SYSTEM RESET citus.recover_2pc_interval")
            conn.execute("SELECT pg_reload_conf()")


def leave_prepared(citus: CitusCluster, url: str, stream_id: int) -> int:
    """Turn the stream's committed events into a failed COMMIT PREPARED's leftovers:
    rows prepared on their worker under a coordinator xid whose record says so.
    The rows keep every value but the commit group (nothing sealed changes).
    Returns that xid."""
    with psycopg.connect(url, autocommit=True) as conn:
        shard, group, port = conn.execute(
            "SELECT p.shardid, p.groupid, n.nodeport FROM pg_dist_placement p"
            " JOIN pg_dist_node n USING (groupid)"
            " WHERE p.shardid = get_shard_id_for_distribution_column('events', %s)",
            (stream_id,),
        ).fetchone()
    worker = next(w for w in citus.workers if w.port == port)
    table = f"events_{shard}"
    with psycopg.connect(worker.url(url.rsplit("/", 1)[1])) as on_worker:
        with on_worker.cursor() as cur:
            cur.execute(f"DELETE FROM {table} WHERE stream_id = %s RETURNING *", (stream_id,))
            columns = [c.name for c in cur.description or ()]
            rows = cur.fetchall()
        on_worker.commit()
        with psycopg.connect(url) as coordinator:
            xid = int(coordinator.execute("SELECT pg_current_xact_id()::text").fetchone()[0])
            # The worker part: prepared before the coordinator commits, as Citus does.
            placeholders = ", ".join(["%s"] * len(columns))
            for row in rows:
                values = {**dict(zip(columns, row, strict=True)), "commit_group": xid}
                on_worker.execute(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders})",
                    list(values.values()),
                )
            on_worker.execute(f"PREPARE TRANSACTION '{GID}'")
            coordinator.execute(
                "INSERT INTO pg_dist_transaction (groupid, gid) VALUES (%s, %s)", (group, GID)
            )
            coordinator.commit()
        on_worker.autocommit = True  # the connection's transaction is the prepared one's
    return xid


def append(store: EventStore, subject: str, count: int = 1) -> list[RecordedEvent]:
    return store.append(NAMESPACE, subject, [NewEvent("noted", {"n": n}) for n in range(count)])


def follow(store: EventStore, after: LogCursor) -> tuple[list[uuid.UUID], LogCursor]:
    """Every event a follower gets now after ``after``, page by page (small pages)."""
    delivered: list[uuid.UUID] = []
    while True:
        page = store.read_all(after, 2)
        delivered += [e.event_id for e in page.events]
        after = page.next_cursor
        if not page.events:
            return delivered, after


def test_the_horizon_waits_for_a_worker_part_still_prepared(
    citus: CitusCluster, citus_url: str, keyring: KeyringFile
) -> None:
    store = EventStore(create_backend(citus_url), keyring)
    try:
        with recovery_paused(citus_url):
            before = append(store, "before")
            # What the horizon rests on: Citus's record of an append's worker part is
            # written by the append's own transaction, whose id is the rows' commit group.
            with psycopg.connect(citus_url, autocommit=True) as conn:
                writers = conn.execute("SELECT xmin::text::bigint FROM pg_dist_transaction")
                assert before[0].commit_group % 2**32 in {xid for (xid,) in writers}
            late = append(store, "late", 3)
            commit_group = leave_prepared(citus, citus_url, late[0].stream.stream_id)
            after = append(store, "after", 2)  # committed everywhere, above the prepared group

            seen, cursor = follow(store, START)
            # Held at the prepared group: what committed below it, nothing above.
            assert seen == [e.event_id for e in before]
            assert all(e.commit_group < commit_group for e in store.read_all(START).events)

            with psycopg.connect(citus_url, autocommit=True) as conn:
                conn.execute("SELECT recover_prepared_transactions()")
                # Committed on the worker, so recovery has dropped the record too.
                left = conn.execute("SELECT FROM pg_dist_transaction WHERE gid = %s", (GID,))
                assert left.rowcount == 0
            more, cursor = follow(store, cursor)
            seen += more
            # Committed 2PC records stay until recovery clears them; they hold nothing.
            last = append(store, "last")
            more, cursor = follow(store, cursor)
            seen += more

        everything = [e.event_id for e in (*before, *late, *after, *last)]
        assert sorted(seen) == sorted(everything)  # none skipped, none twice
        assert len(set(seen)) == len(seen)
        fresh, _ = follow(store, START)
        assert seen == fresh  # and in the order a fresh read gives
    finally:
        store.close()
