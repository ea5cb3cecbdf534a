"""The cluster horizon's widening of 32-bit xids (eventstore.backends.citus), on PostgreSQL.

The horizon reads ``pg_locks`` after its snapshot, so a lock may belong to an
xid given out since: above the snapshot's xmax.  Widened 2^32 too low, such an
xid once made the horizon negative and held every delivery back while two
projection threads took turns.
"""

from __future__ import annotations

import psycopg
import pytest

from eventstore.backends.citus import widened_xid

WRAP = 2**32


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("xid32", "near", "widened"),
    [
        (737, 737, 737),  # the xmax itself
        (735, 737, 735),  # an xid running since before the snapshot
        (740, 737, 740),  # an xid given out after the snapshot
        (WRAP - 3, WRAP + 5, WRAP - 3),  # before the snapshot, across a wraparound
        (2, WRAP - 1, WRAP + 2),  # after the snapshot, across a wraparound
        (5, 7 * WRAP + 2**31, 7 * WRAP + 5),  # 2^31 - 5 before
    ],
)
def test_a_32_bit_xid_widens_to_the_nearest_64_bit_one(
    postgres_server_url: str, xid32: int, near: int, widened: int
) -> None:
    # Literal values (whole numbers): the expression's modulo signs are no placeholders.
    xid, nearby = f"CAST('{xid32}' AS xid)", f"CAST({near} AS bigint)"
    query = f"SELECT {widened_xid(xid, nearby)}"
    with psycopg.connect(postgres_server_url, autocommit=True) as conn:
        row = conn.execute(query.encode()).fetchone()
    assert row == (widened,)
