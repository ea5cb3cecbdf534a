"""Re-wrapping data keys under the active key-encryption key (KEK rotation)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.codec import EventCodec, WrappedKey
from eventstore.schema import data_keys


def rewrap_batch(conn: Connection, codec: EventCodec, limit: int) -> int:
    """Re-wrap up to ``limit`` data keys not yet under the active KEK; how many."""
    active = codec.keys.active_kek_version
    rows = conn.execute(
        sa.select(data_keys)
        .where(data_keys.c.kek_version != active)
        .order_by(data_keys.c.dek_id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    ).all()
    for row in rows:
        dek = codec.unwrap(WrappedKey(row.dek_id, row.kek_version, row.wrapped_key))
        fresh = codec.wrap(dek, row.dek_id)
        conn.execute(
            data_keys.update()
            .where(data_keys.c.dek_id == row.dek_id)
            .values(kek_version=fresh.kek_version, wrapped_key=fresh.wrapped)
        )
    return len(rows)


def versions_in_use(conn: Connection) -> set[int]:
    """KEK versions that still wrap at least one live data key."""
    return set(conn.execute(sa.select(data_keys.c.kek_version).distinct()).scalars())
