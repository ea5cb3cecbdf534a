"""The one lease implementation (eventstore/leased_work.py), as both kinds of leased work
in its one table use it: erasure rebuild jobs and re-embedding units, on both backends.

Each queue is filled through the product (a forget; a re-embedding job), then
claimed, kept and released directly, with a clock the test moves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from eventstore import jobs
from eventstore.leased_work import LeasedQueue
from oblivio import MemoryClient
from projections.storage import vector_rebuilds
from workers.reembed import RebuildRequest

LEASE = timedelta(seconds=30)
T0 = datetime(2030, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Filled:
    queue: LeasedQueue
    key: Callable[[Any], tuple[Any, ...]]
    items: int


def rebuild_jobs(client: MemoryClient) -> Filled:
    """Two subjects forgotten: one rebuild job per projection each."""
    for user in ("ann", "bob"):
        client.store(f"{user} likes tea", user_id=user)
        client.context.eraser.forget(client.context.namespace, user, legal_ground="art17-1-a")
    return Filled(jobs.QUEUE, lambda row: (row.job_id,), 2 * len(client.context.projections))


def reembed_units(client: MemoryClient) -> Filled:
    """A re-embedding job over two subjects: one unit each."""
    for user in ("ann", "bob"):
        client.store(f"{user} likes tea", user_id=user)
    client.context.runner.run_pending()
    client.context.reembedder.start(RebuildRequest())
    return Filled(vector_rebuilds.QUEUE, lambda row: (row.request_id, row.stream_id), 2)


@pytest.fixture(params=[rebuild_jobs, reembed_units], ids=["rebuild-jobs", "reembed-units"])
def filled(request: pytest.FixtureRequest, fresh_memory: MemoryClient) -> Filled:
    fill: Callable[[MemoryClient], Filled] = request.param
    return fill(fresh_memory)


def claim(client: MemoryClient, filled: Filled, worker: str, now: datetime) -> Any:
    with client.context.store.transaction() as tx:
        return filled.queue.claim(tx.connection, worker, now, LEASE)


def call(client: MemoryClient, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    with client.context.store.transaction() as tx:
        return method(tx.connection, *args, **kwargs)


def test_each_item_goes_to_one_worker_until_its_lease_expires(
    fresh_memory: MemoryClient, filled: Filled
) -> None:
    claimed = [claim(fresh_memory, filled, f"w{i}", T0) for i in range(filled.items)]
    assert all(row is not None and row.status == "running" for row in claimed)
    assert len({filled.key(row) for row in claimed}) == filled.items
    assert {(row.lease_owner, row.attempts) for row in claimed[:1]} == {("w0", 1)}
    assert claim(fresh_memory, filled, "late", T0 + LEASE / 2) is None  # all leased

    # A dead worker's item goes to the next claim once its lease has passed.
    retaken = claim(fresh_memory, filled, "late", T0 + LEASE * 2)
    assert retaken is not None
    assert (retaken.attempts, retaken.lease_owner) == (2, "late")
    key = filled.key(retaken)
    holder = next(row.lease_owner for row in claimed if filled.key(row) == key)
    assert not call(fresh_memory, filled.queue.finish, key, holder, T0)  # its lease is lost
    assert call(fresh_memory, filled.queue.finish, key, "late", T0 + LEASE * 2)


def test_a_heartbeat_keeps_the_lease_and_only_the_holder_beats(
    fresh_memory: MemoryClient, filled: Filled
) -> None:
    row = claim(fresh_memory, filled, "w", T0)
    key = filled.key(row)
    assert not call(fresh_memory, filled.queue.heartbeat, key, "other", T0, LEASE)
    assert call(fresh_memory, filled.queue.heartbeat, key, "w", T0 + LEASE * 0.9, LEASE)
    taken = [claim(fresh_memory, filled, "t", T0 + LEASE * 1.5) for _ in range(filled.items)]
    assert key not in {filled.key(t) for t in taken if t is not None}  # still w's


def test_a_released_item_is_queued_again_or_failed_for_good(
    fresh_memory: MemoryClient, filled: Filled
) -> None:
    row = claim(fresh_memory, filled, "w", T0)
    key = filled.key(row)
    assert not call(fresh_memory, filled.queue.release, key, "other", "boom", failed=False)
    assert call(fresh_memory, filled.queue.release, key, "w", "boom " * 200, failed=False)
    again = [claim(fresh_memory, filled, "v", T0) for _ in range(filled.items)]
    [back] = [r for r in again if r is not None and filled.key(r) == key]
    assert back.attempts == 2
    assert back.last_error == ("boom " * 200)[:500]
    assert call(fresh_memory, filled.queue.release, key, "v", "again", failed=True)
    later = T0 + LEASE * 10  # every other lease has expired: all but the failed one return
    retaken = [claim(fresh_memory, filled, "u", later) for _ in range(filled.items)]
    assert key not in {filled.key(r) for r in retaken if r is not None}
    assert claim(fresh_memory, filled, "u", later) is None


def test_each_kind_claims_only_its_own_work(fresh_memory: MemoryClient) -> None:
    """Both kinds of work in the one table at once: a queue never takes the other's."""
    erasure, reembed = rebuild_jobs(fresh_memory), reembed_units(fresh_memory)
    for filled, kind in ((erasure, "erasure"), (reembed, "reembed")):
        claimed = [claim(fresh_memory, filled, "w", T0) for _ in range(filled.items)]
        assert all(row is not None and row.kind == kind for row in claimed)
        assert claim(fresh_memory, filled, "w", T0) is None  # the other kind's items wait
