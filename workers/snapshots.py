"""Snapshot builds in the background: a person's first certified delete replays a part.

A certified delete proves its part against the stream's snapshot
(projections.proofs); without a snapshot it replays the whole stream, which
costs what the person holds.  So snapshots are built ahead of the deletes:

* a periodic pass (``enqueue_due``, the scheduler's ``snapshot_builds``) enqueues
  a build for each projection of each stream whose history grew by
  ``every`` events since its snapshot (or that holds ``every`` events and has
  none);
* a :class:`SnapshotBuilder` claims builds with leases, as the rebuild worker
  claims erasure jobs, and runs each under the stream's lock: from a replay,
  never from the live rows, compared with the live rows before it is kept.

A build waits while an erasure of the stream is being proved (that proof moves
the snapshot itself) and while an asynchronous projection has not applied the
stream's last event (its rows are no state to compare yet); both give the build
back for a later attempt.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from eventstore import EventStore
from eventstore import jobs as job_queue
from projections.proofs import build_snapshot
from projections.registry import ProjectionRegistry
from projections.storage import snapshot_jobs
from workers.job_worker import JobWorker, LeaseLostError, default_worker_id, lease_kept
from workers.policy import ErasurePolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SnapshotPolicy:
    """When snapshots are built (``OBLIVIO_SNAPSHOT_EVERY``, ``0``: never in the
    background) and how a build that cannot run yet waits."""

    every: int = 1000
    #: A build given back (an erasure being proved, vectors still catching up) waits this.
    wait: timedelta = timedelta(seconds=5)
    #: A build that failed for good is enqueued again after this.
    retry_after: timedelta = timedelta(hours=6)


class _NotYetError(Exception):
    """The build cannot run now; it is given back without counting as a failure."""


class SnapshotBuilder(JobWorker):
    """Enqueues due snapshot builds and runs them, one leased build at a time."""

    def __init__(
        self,
        store: EventStore,
        projections: ProjectionRegistry,
        policy: SnapshotPolicy,
        erasure: ErasurePolicy,
        clock: Callable[[], datetime],
        worker_id: str | None = None,
    ) -> None:
        self.store = store
        self.projections = projections
        self.policy = policy
        self.erasure = erasure
        self.clock = clock
        self.worker_id = worker_id or default_worker_id()

    def enqueue_due(self) -> int:
        """Enqueue the builds that are due (see the module docstring); how many."""
        if self.policy.every <= 0:
            return 0
        now = self.clock()
        with self.store.transaction() as tx:
            builds = snapshot_jobs.due(
                tx.connection,
                self.projections.versions(),
                self.policy.every,
                now,
                self.policy.retry_after,
            )
            snapshot_jobs.enqueue(tx.connection, builds, now, self.erasure.max_attempts)
        return len(builds)

    def pending(self) -> int:
        """Builds queued or running."""
        with self.store.reading() as view:
            return snapshot_jobs.pending(view.connection)

    def run_once(self) -> bool:
        with self.store.transaction() as tx:
            job = snapshot_jobs.claim(
                tx.connection, self.worker_id, self.clock(), self.erasure.lease
            )
        if job is None:
            return False
        try:
            with self._keep_lease(job.job_id):
                self._build(job)
        except _NotYetError as e:
            self._give_back(job, str(e), self.policy.wait, counts=False)
        except Exception as e:  # recorded and retried with backoff, never lost
            log.warning("snapshot build %s failed", job.job_id, exc_info=True)
            self._give_back(job, f"{type(e).__name__}: {e}", self.erasure.backoff(job.attempts))
        return True

    def _build(self, job: Any) -> None:
        projection = self.projections.named(job.projection)
        with self.store.transaction() as tx:
            stream = tx.lock_stream(job.stream_id)
            position_text = None
            if stream is not None and stream.closed_at is None:
                conn = tx.connection
                if snapshot_jobs.erasure_open(conn, job.stream_id):
                    raise _NotYetError("an erasure of the stream is being proved")
                position = job_queue.stream_cursor(conn, job.stream_id)
                if not self.projections.holds_complete_state(
                    conn, projection.name, job.stream_id, position
                ):
                    raise _NotYetError(f"{projection.name} has not applied the stream yet")
                build_snapshot(tx, projection, job.stream_id, stream.version)
                position_text = str(position)  # where the snapshot now stands
            done = snapshot_jobs.finish(
                tx.connection, job.job_id, self.worker_id, self.clock(), position=position_text
            )
            if not done:
                raise LeaseLostError(f"lease on snapshot build {job.job_id} was lost")

    def _keep_lease(self, job_id: uuid.UUID) -> Any:
        def renew() -> bool:
            with self.store.transaction() as tx:
                return snapshot_jobs.heartbeat(
                    tx.connection, job_id, self.worker_id, self.clock(), self.erasure.lease
                )

        every = self.erasure.heartbeat.total_seconds()
        return lease_kept(renew, every, f"snapshot build {job_id}")

    def _give_back(self, job: Any, error: str, delay: timedelta, *, counts: bool = True) -> None:
        now = self.clock()
        with self.store.transaction() as tx:
            snapshot_jobs.release(
                tx.connection, job, self.worker_id, error, now + delay, now, counts=counts
            )
