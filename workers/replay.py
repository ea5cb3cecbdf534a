"""Replay: rebuild one subject's projection state from its remaining events.

A replay runs inside a savepoint: the subject's rows are purged and rebuilt
from the log, digested, and the savepoint is rolled back, leaving the live
rows untouched.  Comparing that digest with the live one is how tests and
certificates show that replay equals incremental.
"""

from __future__ import annotations

from collections.abc import Iterable

from eventstore import EventStore, Transaction
from projections.base import Projection, replay


def live_digests(
    tx: Transaction, projections: Iterable[Projection], stream_id: int
) -> dict[str, str]:
    return {p.name: p.digest(tx, stream_id) for p in projections}


def replay_digests(
    tx: Transaction, projections: Iterable[Projection], stream_id: int
) -> dict[str, str]:
    """Digest of each projection rebuilt from the log, without changing live rows."""
    chosen = list(projections)
    savepoint = tx.connection.begin_nested()
    try:
        replay(tx, chosen, stream_id)
        return live_digests(tx, chosen, stream_id)
    finally:
        savepoint.rollback()


def compare(
    store: EventStore, projections: Iterable[Projection], stream_id: int
) -> dict[str, tuple[str, str]]:
    """Live and replayed digest per projection, read in one transaction."""
    chosen = list(projections)
    with store.transaction() as tx:
        tx.lock_stream(stream_id)
        live = live_digests(tx, chosen, stream_id)
        fresh = replay_digests(tx, chosen, stream_id)
    return {name: (live[name], fresh[name]) for name in live}
