"""Projection commits skip the wait for stable storage; the log's never do.

Every commit of a real store, through the facade, is watched at the moment it
is sent: what it wrote and the durability setting of its session (SQLite's
``PRAGMA synchronous``, PostgreSQL's ``synchronous_commit``).  Appends, the
inline node graph with them, and everything else stay fully durable; the
vector projection's batches and the access-count batches, which the log can
replay (or which are statistics), are the only ones that are not.  A process
killed with SIGKILL right after such a commit leaves a store whose projections
catch up from the log to exactly what a fresh replay gives.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections.storage.tables import vectors
from tests.memory import _projection_victim as victim
from workers.replay import compare

ROOT = Path(__file__).resolve().parents[2]
# What each backend reports for its two settings.
DURABLE = {"sqlite": "2", "postgresql": "on"}  # synchronous=FULL, synchronous_commit=on
NOT_DURABLE = {"sqlite": "1", "postgresql": "off"}  # NORMAL, off
# A commit that writes any of these writes the log (or an erasure's record of it).
LOG_TABLES = {"events", "streams", "data_keys", "erasure_requests", "rebuild_jobs", "certificates"}
_WRITTEN = re.compile(r"\b(?:INSERT INTO|(?<!FOR )UPDATE)\s+\"?(\w+)")
_SETTING = {"sqlite": "PRAGMA synchronous", "postgresql": "SHOW synchronous_commit"}


@dataclass
class Commits:
    """For each commit: the tables it inserted into or updated, and its session's setting."""

    backend: str
    seen: list[tuple[frozenset[str], str]] = field(default_factory=list)
    _writes: dict[int, set[str]] = field(default_factory=dict)
    _counts_at_begin: dict[int, dict[str, int]] = field(default_factory=dict)

    def begin(self, conn: sa.Connection) -> None:
        if self.backend == "postgresql":
            self._counts_at_begin[id(conn)] = _write_counts(conn)
            return
        # SQLite's own trace: the append writes through the driver's connection.
        driver = conn.connection.driver_connection
        assert driver is not None
        driver.set_trace_callback(lambda sql: self.statement(conn, None, sql))

    def statement(self, conn: sa.Connection, _c: Any, sql: str, *_args: Any) -> None:
        # PostgreSQL's append is one statement: WITH head AS (UPDATE …) INSERT INTO events.
        tables = _WRITTEN.findall(sql)
        if tables:
            self._writes.setdefault(id(conn), set()).update(tables)

    def commit(self, conn: sa.Connection) -> None:
        driver = conn.connection.driver_connection
        assert driver is not None
        [setting] = driver.execute(_SETTING[self.backend]).fetchone()
        written = self._writes.pop(id(conn), set())
        if self.backend == "sqlite":
            driver.set_trace_callback(None)
        if self.backend == "postgresql":
            # The server's count of the transaction's writes, whichever way they
            # were sent (the append goes through the driver's own cursor).
            before = self._counts_at_begin.pop(id(conn))
            now = _write_counts(conn)
            written.update(t for t, n in now.items() if n > before.get(t, 0))
        self.seen.append((frozenset(written), str(setting)))

    def settings_of(self, table: str) -> set[str]:
        return {setting for tables, setting in self.seen if table in tables}


def _write_counts(conn: sa.Connection) -> dict[str, int]:
    """Rows inserted or updated per table, as the session's pending statistics count them."""
    driver = conn.connection.driver_connection
    assert driver is not None
    query = "SELECT relname, n_tup_ins + n_tup_upd FROM pg_stat_xact_user_tables"
    return dict(driver.execute(query).fetchall())


@pytest.fixture
def commits(fresh_memory: MemoryClient) -> Iterator[Commits]:
    engine = fresh_memory.context.store.engine
    watched = Commits(fresh_memory.context.store.backend_name)
    sa.event.listen(engine, "before_cursor_execute", watched.statement)
    sa.event.listen(engine, "commit", watched.commit)
    sa.event.listen(engine, "begin", watched.begin)
    yield watched
    sa.event.remove(engine, "begin", watched.begin)
    sa.event.remove(engine, "before_cursor_execute", watched.statement)
    sa.event.remove(engine, "commit", watched.commit)


def test_only_projection_batches_commit_without_waiting_for_storage(
    fresh_memory: MemoryClient, commits: Commits
) -> None:
    backend = commits.backend
    for n in range(3):
        fresh_memory.store(f"Alice keeps bees number {n}", user_id="alice")
        assert fresh_memory.retrieve("bees", user_id="alice").results
    event_id = fresh_memory.store("Alice moved to Lyon", user_id="alice")
    fresh_memory.delete_event(event_id, user_id="alice", wait=True)
    fresh_memory.context.access.flush()

    log_writes = [setting for tables, setting in commits.seen if tables & LOG_TABLES]
    projector = [
        setting
        for tables, setting in commits.seen
        if "memory_vectors" in tables and not tables & LOG_TABLES
    ]
    counts = [setting for tables, setting in commits.seen if tables == {"memory_node_access"}]
    assert set(log_writes) == {DURABLE[backend]}, "a write of the log was not durable"
    assert len(projector) >= 3, commits.seen  # one per consistent retrieve
    assert set(projector) == {NOT_DURABLE[backend]}
    assert counts
    assert set(counts) == {NOT_DURABLE[backend]}
    # A durable transaction after relaxed ones, on the same pooled connection, is
    # durable again (a subject new to the process: its store takes the stream's lock
    # in a transaction of this pool).
    fresh_memory.store("one more", user_id="bob")
    last_tables, last_setting = commits.seen[-1]
    assert "events" in last_tables
    assert last_setting == DURABLE[backend]
    # A store at the head the process remembers commits on its own
    # (``Backend.append_connection``: autocommit on PostgreSQL, whose pool never relaxes
    # the setting; SQLite's own BEGIN IMMEDIATE on a pooled connection, which returns
    # to the pool with the durable setting).
    store_backend = fresh_memory.context.store.backend
    with store_backend.append_connection() as conn:
        driver = conn.connection.driver_connection
        assert driver is not None
        [setting] = driver.execute(_SETTING[backend]).fetchone()
    assert str(setting) == DURABLE[backend]


def test_a_kill_9_after_projection_commits_loses_nothing_the_log_cannot_replay(
    fresh_settings: Settings,
) -> None:
    child = subprocess.run(
        [sys.executable, "-m", "tests.memory._projection_victim", fresh_settings.model_dump_json()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert child.stdout.split() == ["projected", "stored"], child.stderr

    with MemoryClient(settings=fresh_settings) as client:
        ctx = client.context
        texts = [e.content for e in client.get_events(user_id=victim.USER, limit=1000)]
        assert texts == victim.texts(), "an acknowledged store was lost"
        head = ctx.store.head(ctx.namespace, victim.USER)
        cursor = ctx.store.last_cursor(ctx.namespace, victim.USER)
        assert head is not None
        assert cursor is not None
        stream_id = head.stream.stream_id
        # What the killed process projected is there; the rest replays from the log.
        assert vector_rows(client, stream_id) == victim.PROJECTED
        # (A wait, not run_pending: on a shared server another session's open
        # transaction can hold delivery back for a moment.)
        assert ctx.runner.catch_up(cursor, stream_id, 60)
        assert vector_rows(client, stream_id) == victim.PROJECTED + victim.PENDING
        digests = compare(ctx.store, list(ctx.projections), stream_id)
        assert all(live == fresh for live, fresh in digests.values()), digests
        found = client.retrieve(victim.texts()[-1], user_id=victim.USER, limit=1)
        assert found.results[0].node.content == victim.texts()[-1]


def vector_rows(client: MemoryClient, stream_id: int) -> int:
    query = sa.select(sa.func.count()).where(vectors.c.stream_id == stream_id)
    with client.context.store.reading() as view:
        return int(view.connection.execute(query).scalar_one())
