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

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore import START, LogCursor, Transaction
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


def claim(conn: Connection, name: str, partition: int) -> LogCursor | None:
    """Lock a partition's checkpoint for this transaction; ``None`` if another has it."""
    query = (
        sa.select(checkpoints.c.commit_group, checkpoints.c.position)
        .where(checkpoints.c.name == name, checkpoints.c.partition == partition)
        .with_for_update(skip_locked=True)
    )
    row = conn.execute(query).first()
    return None if row is None else LogCursor(row.commit_group, row.position)


def hold(conn: Connection, name: str, partition: int) -> None:
    """Wait for and lock a partition's checkpoint: erasure uses this so that no
    runner batch can re-insert rows it purges (the runner's batch either
    committed before, and is purged, or starts after and sees the erasure)."""
    conn.execute(
        sa.select(checkpoints.c.name)
        .where(checkpoints.c.name == name, checkpoints.c.partition == partition)
        .with_for_update()
    )


def advance(conn: Connection, name: str, partition: int, cursor: LogCursor, now: datetime) -> None:
    conn.execute(
        checkpoints.update()
        .where(checkpoints.c.name == name, checkpoints.c.partition == partition)
        .values(commit_group=cursor.commit_group, position=cursor.position, updated_at=now)
    )


def move(
    conn: Connection,
    name: str,
    partition: int,
    expected: LogCursor,
    cursor: LogCursor,
    now: datetime,
) -> bool:
    """Move a partition's checkpoint from ``expected`` to ``cursor`` and keep it locked
    for this transaction; ``False`` (nothing written) if another moved it first.

    One statement for a follower that did its page's work before its transaction
    (the claims extraction worker, the likely-update detector): the claim and the
    advance at once.  Unlike :func:`claim` it waits while another transaction holds
    the row (one such follower's short transaction); PostgreSQL then evaluates the
    condition again on the row that one committed.
    """
    moved = conn.execute(
        checkpoints.update()
        .where(
            checkpoints.c.name == name,
            checkpoints.c.partition == partition,
            checkpoints.c.commit_group == expected.commit_group,
            checkpoints.c.position == expected.position,
        )
        .values(commit_group=cursor.commit_group, position=cursor.position, updated_at=now)
    )
    return moved.rowcount == 1


def read(conn: Connection, name: str, partition: int) -> LogCursor:
    query = sa.select(checkpoints.c.commit_group, checkpoints.c.position).where(
        checkpoints.c.name == name, checkpoints.c.partition == partition
    )
    row = conn.execute(query).first()
    return START if row is None else LogCursor(row.commit_group, row.position)


def lag(conn: Connection, name: str) -> list[tuple[int, LogCursor]]:
    """Every partition's checkpoint, for health reporting."""
    query = (
        sa.select(checkpoints.c.partition, checkpoints.c.commit_group, checkpoints.c.position)
        .where(checkpoints.c.name == name)
        .order_by(checkpoints.c.partition)
    )
    return [(r.partition, LogCursor(r.commit_group, r.position)) for r in conn.execute(query)]
