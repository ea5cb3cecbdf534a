"""Check: the Citus reader's horizon when a transaction id is taken during its statement.

    python benchmarks/citus_horizon_race.py

``eventstore.backends.citus`` reads a reader's horizon in one statement: the
snapshot's horizon, lowered to the oldest transaction id whose lock is still held
(read from ``pg_locks``), each 32-bit lock xid widened to 64 bits against the
snapshot's ``xmax``.  ``pg_locks`` is read after the snapshot is taken, so it can
list an xid given out in between, at or above ``xmax``.  This script makes that
deterministic: a REPEATABLE READ transaction fixes the snapshot, another session
uses up one xid and takes the next (holding its lock), and the horizon is read in
the first transaction.  The horizon must not fall below the snapshot's ``xmin``
(nothing older is running); the script prints both and exits 1 if it does.

Seen under load in ``benchmarks/citus_rebalance.py``: a fresh ``read_all`` from the
start of the log got empty pages for seconds while writers ran (a reader that has
already read past keeps its own floor, ``settled``, so it went on).
"""

from __future__ import annotations

import sys

import psycopg

from oblivio_bench.citus import citus_cluster, horizon_statement


def main() -> int:
    with citus_cluster(workers=1, shard_count=4, durable=False) as cluster:
        url = cluster.create_database("horizon_race")
        with psycopg.connect(url) as reader, psycopg.connect(url) as writer:
            reader.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = reader.execute("SELECT pg_snapshot_xmin(pg_current_snapshot())::text")
            xmin = int(row.fetchone()[0])
            with psycopg.connect(url) as burner:  # one xid used up after the snapshot
                burner.execute("SELECT pg_current_xact_id()")
            taken = writer.execute("SELECT pg_current_xact_id()::text").fetchone()
            horizon = int(reader.execute(horizon_statement()).fetchone()[0])
            reader.rollback()
            writer.rollback()
    print(f"snapshot xmin {xmin}; xid taken after the snapshot {taken[0]}; horizon {horizon}")
    if horizon < xmin:
        print("FAIL: the horizon fell below the snapshot's xmin (readers get empty pages)")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
