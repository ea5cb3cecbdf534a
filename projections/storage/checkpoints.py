"""Checkpoints of asynchronous projections, one row per (projection, partition).

A worker claims a partition by locking its checkpoint row for the length of
one batch (``FOR UPDATE SKIP LOCKED`` on PostgreSQL: a busy partition is
skipped, not waited for).  The rows it writes and the moved checkpoint commit
together, so a batch is applied exactly once even when a worker dies midway.
SQLite ignores the row lock; its single writer (``BEGIN IMMEDIATE``) gives
the same exclusion.  A follower that reads and judges its page before its
transaction (so that nothing slow holds the row) instead moves the checkpoint
from where it read it, in one conditional statement (:func:`move`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import START, LogCursor, Transaction
from projections.storage import Fetch, WriteAtCommit
from projections.storage.tables import checkpoints


def ensure_checkpoints(tx: Transaction, name: str, partitions: int, now: datetime) -> None:
    """Create missing checkpoint rows (idempotent, safe under concurrency)."""
    insert = tx.insert_unless_present(checkpoints)
    tx.connection.execute(
        insert,
        [
            {
                "name": name,
                "partition": p,
                "commit_group": START.commit_group,
                "position": START.position,
                "updated_at": now,
            }
            for p in range(partitions)
        ],
    )


def _param(name: str, column: sa.Column[Any]) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


# Built once: a follower runs these on every page, and building a statement (its
# expressions, then its cache key) cost more of a page's CPU than compiling it.
_ROW = sa.and_(
    checkpoints.c.name == _param("of_name", checkpoints.c.name),
    checkpoints.c.partition == _param("of_partition", checkpoints.c.partition),
)
_AT = sa.and_(
    checkpoints.c.commit_group == _param("expected_group", checkpoints.c.commit_group),
    checkpoints.c.position == _param("expected_position", checkpoints.c.position),
)
_READ = sa.select(checkpoints.c.commit_group, checkpoints.c.position).where(_ROW)
_CLAIM = _READ.with_for_update(skip_locked=True)
_HOLD = sa.select(checkpoints.c.name).where(_ROW).with_for_update()
_ADVANCE = (
    checkpoints.update()
    .where(_ROW)
    .values(
        commit_group=_param("to_group", checkpoints.c.commit_group),
        position=_param("to_position", checkpoints.c.position),
        updated_at=_param("now", checkpoints.c.updated_at),
    )
)
_MOVE = _ADVANCE.where(_AT).returning(checkpoints.c.position)


def _of(name: str, partition: int) -> dict[str, Any]:
    return {"of_name": name, "of_partition": partition}


def _to(cursor: LogCursor, now: datetime) -> dict[str, Any]:
    return {"to_group": cursor.commit_group, "to_position": cursor.position, "now": now}


def claim(conn: Connection, name: str, partition: int, fetch: Fetch) -> LogCursor | None:
    """Lock a partition's checkpoint for this transaction; ``None`` if another has it.

    Read through ``fetch`` (``eventstore.Backend.fetch``): as a transaction's first
    statement it then goes to PostgreSQL in one query with the BEGIN it owes, one
    wait for both.
    """
    rows = fetch(conn, _CLAIM, _of(name, partition))
    return None if not rows else LogCursor(*rows[0])


def hold(conn: Connection, name: str, partition: int) -> None:
    """Wait for and lock a partition's checkpoint: erasure uses this so that no
    runner batch can re-insert rows it purges (the runner's batch either
    committed before, and is purged, or starts after and sees the erasure)."""
    conn.execute(_HOLD, _of(name, partition))


def advance(
    conn: Connection,
    name: str,
    partition: int,
    cursor: LogCursor,
    now: datetime,
    write: WriteAtCommit,
) -> None:
    """Move a claimed partition's checkpoint to ``cursor`` when the transaction commits
    (``write``: ``eventstore.Backend.write_at_commit``; nothing after it reads the
    row, which the claim holds locked): on PostgreSQL with the COMMIT, one wait."""
    write(conn, _ADVANCE, _of(name, partition) | _to(cursor, now))


def move(
    conn: Connection,
    name: str,
    partition: int,
    expected: LogCursor,
    cursor: LogCursor,
    now: datetime,
    fetch: Fetch,
) -> bool:
    """Move a partition's checkpoint from ``expected`` to ``cursor`` and keep it locked
    for this transaction; ``False`` (nothing written) if another moved it first.

    One statement for a follower that did its page's work before its transaction
    (the claims extraction worker, the likely-update detector): the claim and the
    advance at once.  Unlike :func:`claim` it waits while another transaction holds
    the row (one such follower's short transaction); PostgreSQL then evaluates the
    condition again on the row that one committed.  Run through ``fetch`` as
    :func:`claim` is, for the same reason: as the transaction's first statement it
    goes out with its BEGIN (the row it returns says it moved).
    """
    at = {"expected_group": expected.commit_group, "expected_position": expected.position}
    return bool(fetch(conn, _MOVE, _of(name, partition) | at | _to(cursor, now)))


def read(conn: Connection, name: str, partition: int) -> LogCursor:
    row = conn.execute(_READ, _of(name, partition)).first()
    return START if row is None else LogCursor(row.commit_group, row.position)


def lag(conn: Connection, name: str) -> list[tuple[int, LogCursor]]:
    """Every partition's checkpoint, for health reporting."""
    query = (
        sa.select(checkpoints.c.partition, checkpoints.c.commit_group, checkpoints.c.position)
        .where(checkpoints.c.name == name)
        .order_by(checkpoints.c.partition)
    )
    return [(r.partition, LogCursor(r.commit_group, r.position)) for r in conn.execute(query)]
