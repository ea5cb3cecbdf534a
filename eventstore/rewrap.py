"""Re-wrapping data keys under the active key-encryption key (KEK rotation)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.codec import EventCodec, WrappedKey
from eventstore.schema import data_keys


def rewrap_batch(conn: Connection, codec: EventCodec, limit: int) -> int:
    """Re-wrap up to ``limit`` data keys not yet under the active KEK; how many were found.

    The keys are read without a lock and each is re-wrapped only if it is still
    wrapped as it was read (a concurrent rotation re-wrapped it, an erasure deleted
    it: then nothing is written).  A locking read of a batch (``FOR UPDATE SKIP
    LOCKED``) would read every shard of a cluster, where Citus refuses row locks;
    each update here names its stream, so it is routed to the one shard holding it.
    """
    active = codec.keys.active_kek_version
    rows = conn.execute(
        sa.select(data_keys)
        .where(data_keys.c.kek_version != active)
        .order_by(data_keys.c.dek_id)
        .limit(limit)
    ).all()
    for row in rows:
        dek = codec.unwrap(WrappedKey(row.dek_id, row.kek_version, row.wrapped_key))
        fresh = codec.wrap(dek, row.dek_id)
        conn.execute(
            data_keys.update()
            .where(
                data_keys.c.stream_id == row.stream_id,
                data_keys.c.dek_id == row.dek_id,
                data_keys.c.kek_version == row.kek_version,
            )
            .values(kek_version=fresh.kek_version, wrapped_key=fresh.wrapped)
        )
    return len(rows)


def versions_in_use(conn: Connection) -> set[int]:
    """KEK versions that still wrap at least one live data key."""
    return set(conn.execute(sa.select(data_keys.c.kek_version).distinct()).scalars())
