"""Named leases for periodic jobs: one runner at a time across processes."""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from appdata.tables import scheduler_leases
from eventstore.transaction import Transaction


def try_acquire(tx: Transaction, name: str, owner: str, now: datetime, ttl: timedelta) -> bool:
    """Take the lease ``name`` if it is free, expired, or already ours."""
    conn = tx.connection
    conn.execute(
        tx.insert_unless_present(scheduler_leases).values(
            name=name, owner=owner, expires_at=now - timedelta(seconds=1)
        )
    )
    result = conn.execute(
        scheduler_leases.update()
        .where(
            scheduler_leases.c.name == name,
            sa.or_(scheduler_leases.c.expires_at < now, scheduler_leases.c.owner == owner),
        )
        .values(owner=owner, expires_at=now + ttl)
    )
    return result.rowcount == 1


def release(conn: Connection, name: str, owner: str, now: datetime) -> None:
    conn.execute(
        scheduler_leases.update()
        .where(scheduler_leases.c.name == name, scheduler_leases.c.owner == owner)
        .values(expires_at=now)
    )
