"""Per-stream marks of asynchronous projections: how far each stream is applied.

One row per (stream, projection): the version and log cursor of the stream's
last event the projection applied (no row: none yet).  The likely-update
detector (workers.updates) keeps its own marks, of what it judged, the same way.
Whoever applies events of a stream, the runner's page of a log partition or a
consistent read's catch-up of its own stream (workers.projector), first locks
the stream's row (:func:`lock`), applies only the events after it and moves it
(:func:`advance`) in the same transaction: an event is applied exactly once,
whoever reaches it first, and the other skips it.  The lock is an upsert, so it
also holds a row that did not exist yet: an erasure that holds it (:func:`lock` as
well) keeps every applier of the stream out until it commits.

Keyed by stream id: on Citus the row sits on the stream's shard beside its events
and vectors, so a read's catch-up of one stream touches one shard and commits
with one-phase commit.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgres_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from eventstore import START, LogCursor
from eventstore.schema import streams
from projections.storage import Fetch, WriteAtCommit
from projections.storage.tables import stream_marks


class StreamMark(NamedTuple):
    """A stream's last event a projection applied: its version (0: none) and cursor."""

    version: int
    cursor: LogCursor


NOTHING_APPLIED = StreamMark(0, START)


@functools.cache
def _lock_statement(on_postgres: bool) -> Any:
    """The upsert that locks a stream's row, creating it at version 0 if missing, and
    returns where it stands (the no-op update is what takes the row lock; SQLite's
    single writer gives the same exclusion)."""
    insert = (postgres_insert if on_postgres else sqlite_insert)(stream_marks)
    return insert.on_conflict_do_update(
        index_elements=[stream_marks.c.stream_id, stream_marks.c.name],
        set_={"version": stream_marks.c.version},
    ).returning(
        stream_marks.c.stream_id,
        stream_marks.c.version,
        stream_marks.c.commit_group,
        stream_marks.c.position,
    )


_ADVANCE = (
    stream_marks.update()
    .where(
        stream_marks.c.stream_id == sa.bindparam("of_stream"),
        stream_marks.c.name == sa.bindparam("of_name"),
    )
    .values(
        version=sa.bindparam("to_version"),
        commit_group=sa.bindparam("to_group"),
        position=sa.bindparam("to_position"),
    )
)


def lock(conn: Connection, name: str, stream_ids: Collection[int]) -> dict[int, StreamMark]:
    """Lock the marks of ``stream_ids`` for this transaction (waiting for a holder)
    and say where each stands.  Rows are locked in stream id order, one statement,
    so two transactions locking overlapping sets cannot deadlock on them."""
    if not stream_ids:
        return {}
    rows = [
        {"stream_id": s, "name": name, "version": 0, "commit_group": 0, "position": 0}
        for s in sorted(stream_ids)
    ]
    statement = _lock_statement(conn.dialect.name == "postgresql").values(rows)
    return {
        row.stream_id: StreamMark(row.version, LogCursor(row.commit_group, row.position))
        for row in conn.execute(statement)
    }


def advance(
    conn: Connection, name: str, marks: Mapping[int, StreamMark], write: WriteAtCommit
) -> None:
    """Move the locked marks of the streams in ``marks`` to their new values when the
    transaction commits (``write``: ``eventstore.Backend.write_at_commit``; nothing
    after it reads them, which the lock holds): on PostgreSQL with the COMMIT."""
    for stream_id, mark in marks.items():
        params = {
            "of_stream": stream_id,
            "of_name": name,
            "to_version": mark.version,
            "to_group": mark.cursor.commit_group,
            "to_position": mark.cursor.position,
        }
        write(conn, _ADVANCE, params)


# PostgreSQL's limit on each lock wait of the transaction (milliseconds as text).
_LOCK_TIMEOUT = sa.select(
    sa.func.set_config("lock_timeout", sa.bindparam("milliseconds", type_=sa.String()), True)
)


def bound_lock_waits(conn: Connection, fetch: Fetch, seconds: float) -> None:
    """Give up each lock wait of this transaction after ``seconds`` (PostgreSQL: the
    wait fails as an ``OperationalError``), for a reader that may wait only that long.

    Run through ``fetch`` as the transaction's first statement it goes out with the
    BEGIN, no wait of its own; on Citus it is the coordinator's setting, which bounds
    the wait for a lock held there (every stream's marks held at once, ``hold_all``);
    a row of one stream is held on its worker by a runner's page or an erasure, short
    transactions.  SQLite waits for its single writer by its busy timeout instead.
    """
    if conn.dialect.name == "postgresql":
        fetch(conn, _LOCK_TIMEOUT, {"milliseconds": str(max(1, int(seconds * 1000)))})


_HELD = (
    sa.select(stream_marks.c.version, stream_marks.c.commit_group, stream_marks.c.position)
    .where(
        stream_marks.c.stream_id == sa.bindparam("stream_id"),
        stream_marks.c.name == sa.bindparam("name"),
    )
    .with_for_update()
)


def held(conn: Connection, name: str, stream_id: int) -> StreamMark:
    """Where the stream's mark stands, locked for this transaction if it exists (a
    caller that must keep appliers out holds it with :func:`lock` instead, which
    creates a missing row to hold)."""
    row = conn.execute(_HELD, {"stream_id": stream_id, "name": name}).first()
    return NOTHING_APPLIED if row is None else StreamMark(row[0], LogCursor(row[1], row[2]))


def versions(conn: Connection, name: str, stream_ids: Collection[int]) -> dict[int, int]:
    """The marked versions of those of ``stream_ids`` that have a mark (not locked: what
    a follower skips before it does slow work, checked again under :func:`lock`)."""
    query = sa.select(stream_marks.c.stream_id, stream_marks.c.version).where(
        stream_marks.c.name == name, stream_marks.c.stream_id.in_(sorted(stream_ids))
    )
    return {row.stream_id: row.version for row in conn.execute(query)}


def closed_among(conn: Connection, stream_ids: Collection[int]) -> set[int]:
    """Those of ``stream_ids`` whose generation is closed (forgotten): a mark locked
    at version 0 may be a row :func:`lock` just made again for a stream a forget
    purged while the caller waited, which the caller then drops (:func:`drop`)."""
    if not stream_ids:
        return set()
    query = sa.select(streams.c.stream_id).where(
        streams.c.stream_id.in_(sorted(stream_ids)), streams.c.closed_at.is_not(None)
    )
    return set(conn.execute(query).scalars())


def drop(conn: Connection, name: str, stream_ids: Collection[int]) -> None:
    """Remove the marks ``name`` keeps of ``stream_ids`` (held by the caller)."""
    if stream_ids:
        conn.execute(
            stream_marks.delete().where(
                stream_marks.c.name == name, stream_marks.c.stream_id.in_(sorted(stream_ids))
            )
        )


def purge_stream(conn: Connection, stream_id: int) -> None:
    """Drop every projection's mark of a forgotten stream, with the rows it derived (held
    by the caller: :func:`lock`)."""
    conn.execute(stream_marks.delete().where(stream_marks.c.stream_id == stream_id))


def hold_all(conn: Connection) -> None:
    """Keep every applier of every stream out until this transaction ends (what a
    switch of every subject's embedder needs): a share lock on the table conflicts
    with the row-exclusive lock each :func:`lock` takes, and waits for those that hold
    one.  PostgreSQL only (on Citus the coordinator's lock, which every routed
    statement takes too): SQLite's single writer already excludes them."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("LOCK TABLE projection_stream_marks IN SHARE MODE"))
