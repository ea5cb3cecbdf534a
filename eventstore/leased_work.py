"""Leased work: the one implementation of claim, lease, heartbeat and release.

Leased work is kept in one table, ``rebuild_jobs``, one queue per ``kind``:
erasure rebuild jobs (:mod:`eventstore.jobs`) and re-embedding units
(:mod:`projections.storage.vector_rebuilds`).  Its lease columns are
``status`` (queued, running, done, failed), ``attempts``, ``lease_owner``,
``lease_expires_at``, ``finished_at`` and ``last_error``.  A
:class:`LeasedQueue` names its kind, the key its items are found by and what
else makes an item runnable, and does the rest.

A claim picks the first runnable item (queued and due, or running with an
expired lease, i.e. its worker died) and marks it running for the worker until
the lease expires.  On PostgreSQL the pick uses ``FOR UPDATE SKIP LOCKED``, so
concurrent workers never claim the same item and never wait on each other; the
update checks again that the item is runnable.  SQLite ignores the locking
clause; its single writer (``BEGIN IMMEDIATE``) makes the claim exclusive.
A worker beats while it works, so a live worker keeps its item however long
it takes, and a dead one loses it one lease after its last beat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.schema import rebuild_jobs

Key = tuple[Any, ...]


@dataclass(frozen=True)
class LeasedQueue:
    """The leased items of one ``kind``, found by the columns ``key``.

    ``due`` names a column an item must have reached (``<= now``) to be
    claimed while queued; ``parent`` is a table joined (on ``parent_on``) to
    pick items of running parents only, with ``parent_runs`` the condition, and
    ``order`` the claim order.
    """

    kind: str
    key: Sequence[str]
    order: Sequence[sa.ColumnElement[Any]]
    due: str | None = None
    parent: sa.Table | None = None
    parent_on: sa.ColumnElement[bool] | None = None
    parent_runs: sa.ColumnElement[bool] | None = None
    #: Every kind's items are rows of this one table.
    table: sa.Table = rebuild_jobs

    def _runnable(self, now: datetime) -> sa.ColumnElement[bool]:
        c = self.table.c
        queued = c.status == "queued"
        if self.due is not None:
            queued = sa.and_(queued, c[self.due] <= now)
        expired = sa.and_(c.status == "running", c.lease_expires_at < now)
        return sa.and_(c.kind == self.kind, sa.or_(queued, expired))

    def _is(self, key: Key) -> sa.ColumnElement[bool]:
        return sa.and_(*(self.table.c[k] == v for k, v in zip(self.key, key, strict=True)))

    def _held(self, key: Key, worker: str) -> sa.ColumnElement[bool]:
        c = self.table.c
        return sa.and_(self._is(key), c.lease_owner == worker, c.status == "running")

    def claim(self, conn: Connection, worker: str, now: datetime, lease: timedelta) -> Any:
        """Take the next runnable item for ``worker``: its row after the claim, or ``None``."""
        runnable = self._runnable(now)
        pick = sa.select(*(self.table.c[k] for k in self.key)).where(runnable)
        if self.parent is not None and self.parent_runs is not None:
            joined = self.table.join(self.parent, self.parent_on)
            pick = pick.select_from(joined).where(self.parent_runs)
        picked = conn.execute(
            pick.order_by(*self.order).limit(1).with_for_update(of=self.table, skip_locked=True)
        ).first()
        if picked is None:
            return None
        c = self.table.c
        stmt = (
            self.table.update()
            .where(self._is(tuple(picked)), runnable)
            .values(
                status="running",
                lease_owner=worker,
                lease_expires_at=now + lease,
                attempts=c.attempts + 1,
            )
            .returning(*c)
        )
        return conn.execute(stmt).first()

    def heartbeat(
        self,
        conn: Connection,
        key: Key,
        worker: str,
        now: datetime,
        lease: timedelta,
        **values: Any,
    ) -> bool:
        """Extend ``worker``'s lease to ``now + lease`` (setting ``values`` too); False if
        the item is not running under its lease."""
        stmt = self.table.update().where(self._held(key, worker))
        result = conn.execute(stmt.values(lease_expires_at=now + lease, **values))
        return result.rowcount == 1

    def finish(self, conn: Connection, key: Key, worker: str, now: datetime, **values: Any) -> bool:
        """Mark the item done, only if ``worker`` still holds it; False if the lease was lost.

        ``lease_owner`` stays (who did it) unless ``values`` clear it."""
        result = conn.execute(
            self.table.update()
            .where(self._held(key, worker))
            .values(status="done", finished_at=now, lease_expires_at=None, **values)
        )
        return result.rowcount == 1

    def release(
        self, conn: Connection, key: Key, worker: str, error: str, *, failed: bool, **values: Any
    ) -> bool:
        """Give the item up after a failed attempt: queued again, or failed for good
        (with ``values`` set too); False if ``worker`` did not hold it."""
        result = conn.execute(
            self.table.update()
            .where(self._held(key, worker))
            .values(
                status="failed" if failed else "queued",
                last_error=error[:500],
                lease_owner=None,
                lease_expires_at=None,
                **values,
            )
        )
        return result.rowcount == 1

    def reap(self, conn: Connection, now: datetime) -> list[Any]:
        """Fail for good the items whose lease expired on their last allowed attempt
        (their worker died on it, and no claim may start another); their rows."""
        c = self.table.c
        stmt = (
            self.table.update()
            .where(
                c.kind == self.kind,
                c.status == "running",
                c.lease_expires_at < now,
                c.attempts >= c.max_attempts,
            )
            .values(
                status="failed",
                last_error="lease expired on the last attempt",
                finished_at=now,
                lease_owner=None,
                lease_expires_at=None,
            )
            .returning(*c)
        )
        return list(conn.execute(stmt))

    def held(self, conn: Connection, key: Key, worker: str) -> Any:
        """The item's row, locked, if ``worker`` holds it."""
        query = sa.select(self.table).where(self._held(key, worker)).with_for_update()
        return conn.execute(query).first()
