"""Replay: rebuild one subject's projection state from its remaining events.

A replay runs inside a savepoint: the subject's rows are purged and rebuilt
from the log, digested, and the savepoint is rolled back, leaving the live
rows untouched.  Comparing that digest with the live one is how tests and
certificates show that replay equals incremental.
"""

from __future__ import annotations

from collections.abc import Sequence

from eventstore import EventStore, Transaction
from projections.base import Projection


def live_digests(
    tx: Transaction, projections: Sequence[Projection], stream_id: int
) -> dict[str, str]:
    cipher = tx.cipher(stream_id)
    return {p.name: p.digest(tx.connection, cipher, stream_id) for p in projections}


def replay_digests(
    tx: Transaction, projections: Sequence[Projection], stream_id: int
) -> dict[str, str]:
    """Digest of each projection rebuilt from the log, without changing live rows."""
    savepoint = tx.connection.begin_nested()
    try:
        rebuild(tx, projections, stream_id)
        return live_digests(tx, projections, stream_id)
    finally:
        savepoint.rollback()


def rebuild(tx: Transaction, projections: Sequence[Projection], stream_id: int) -> int:
    """Purge and re-apply one stream's events to each projection; the events applied."""
    cipher = tx.cipher(stream_id)
    for projection in projections:
        projection.purge(tx.connection, stream_id)
    if cipher is None:
        return 0
    applied = 0
    for event in tx.read_stream_id(stream_id):
        if event.data is None:
            continue
        for projection in projections:
            projection.apply(tx.connection, cipher, event)
        applied += 1
    return applied


def compare(
    store: EventStore, projections: Sequence[Projection], stream_id: int
) -> dict[str, tuple[str, str]]:
    """Live and replayed digest per projection, read in one transaction."""
    with store.transaction() as tx:
        tx.lock_stream(stream_id)
        live = live_digests(tx, projections, stream_id)
        fresh = replay_digests(tx, projections, stream_id)
    return {name: (live[name], fresh[name]) for name in live}
