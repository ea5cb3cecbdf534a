"""The rebuild worker: claims rebuild jobs, replays the subject, certifies.

Each job is claimed with a lease in its own short transaction, then done in a
second transaction that rebuilds the projection for the subject from what
remains of the log, records the live digest (taken before the rebuild, see
``_digests_around_rebuild``) and the replayed one, and marks
the job done only if this worker still holds the lease.  While it works, a
thread of the worker renews the lease (a heartbeat every third of the lease),
so a live worker never loses its job to another; a worker that dies mid-job
stops beating, its lease expires, and the next claim picks the job up again.
Failures are retried with exponential backoff and fail for good after the
policy's maximum attempts, which marks the request failed.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from eventstore import AuditEntry, EventStore, Transaction
from eventstore import erasure as requests
from eventstore import jobs as job_queue
from eventstore.errors import OperationalError
from projections.base import Projection, compose_digests, replay
from projections.proofs import Proof, prove_part, take_snapshot
from projections.registry import ProjectionRegistry
from projections.storage import snapshot_store
from workers.certify import Certifier
from workers.job_worker import JobWorker, LeaseLostError, default_worker_id, lease_kept
from workers.policy import ErasurePolicy
from workers.replay import live_digests, replay_digests

log = logging.getLogger(__name__)


class RebuildWorker(JobWorker):
    """Processes rebuild jobs until none are runnable."""

    def __init__(
        self,
        store: EventStore,
        projections: ProjectionRegistry,
        certifier: Certifier,
        policy: ErasurePolicy,
        clock: Callable[[], datetime],
        worker_id: str | None = None,
    ) -> None:
        self.store = store
        self.projections = projections
        self.certifier = certifier
        self.policy = policy
        self.clock = clock
        self.worker_id = worker_id or default_worker_id()

    def run_once(self) -> bool:
        """Claim and process one job; False when there was nothing to do."""
        with self.store.transaction() as tx:
            job = job_queue.claim(tx.connection, self.worker_id, self.clock(), self.policy.lease)
        if job is None:
            return False
        try:
            with self._keep_lease(job.job_id):
                self._process(job)
        except Exception as e:  # every failure is recorded and retried, never lost
            self._record_failure(job, e)
        return True

    def _keep_lease(self, job_id: uuid.UUID) -> contextlib.AbstractContextManager[None]:
        """Renew the lease on ``job_id`` from a thread of its own while the block runs."""

        def renew() -> bool:
            with self.store.transaction() as tx:
                return job_queue.heartbeat(
                    tx.connection, job_id, self.worker_id, self.clock(), self.policy.lease
                )

        return lease_kept(renew, self.policy.heartbeat.total_seconds(), f"job {job_id}")

    def _process(self, job: Any) -> None:
        projection = self.projections.named(job.projection)
        with self.store.transaction() as tx:
            results, proof = self._rebuild(tx, projection, job.stream_id)
            if proof:
                snapshot_store.save_proof(tx.connection, job.stream_id, job.job_id, proof)
            if not job_queue.finish(
                tx.connection, job.job_id, self.worker_id, self.clock(), **results
            ):
                raise LeaseLostError(f"lease on job {job.job_id} was lost")
            self.certifier.issue_if_complete(tx, job.request_id)

    def _rebuild(
        self, tx: Transaction, projection: Projection, stream_id: int | None
    ) -> tuple[dict[str, str], dict[str, Any] | None]:
        """The job's results (position, live and replay digests) and how they were taken."""
        if stream_id is None:  # a subject that never wrote anything
            return {"position": "0:0", "state_digest": "", "replay_digest": ""}, None
        stream = tx.lock_stream(stream_id)
        version = 0 if stream is None else stream.version
        position = job_queue.stream_cursor(tx.connection, stream_id)
        if self.projections.holds_complete_state(
            tx.connection, projection.name, stream_id, position
        ):
            proof = prove_part(tx, projection, stream_id, version) or _digests_around_rebuild(
                tx, projection, stream_id, version
            )
        else:
            proof = _rebuild_then_replay(tx, projection, stream_id, version)
        results = {
            "position": str(position),
            "state_digest": proof.state_digest,
            "replay_digest": proof.replay_digest,
        }
        return results, proof.details

    def _record_failure(self, job: Any, error: Exception) -> None:
        now = self.clock()
        with self.store.transaction() as tx:
            status = job_queue.retry_or_fail(
                tx.connection,
                job.job_id,
                self.worker_id,
                f"{type(error).__name__}: {error}",
                now + self.policy.backoff(job.attempts),
                now,
                # A lost connection, a restarting node, a serialisation failure: the
                # database could not complete the attempt, which says nothing about
                # the job.  Counted, five of them in the 30 s of backoff failed the
                # erasure for good during a short outage, with nothing to retry it.
                spent=not isinstance(error, OperationalError),
            )
            if status == "failed":
                mark_request_failed(tx, job.request_id, f"rebuild of {job.projection} failed")


def _digests_around_rebuild(
    tx: Transaction, projection: Projection, stream_id: int, version: int
) -> Proof:
    """(live, replay) digests from one replay: the live rows digested before it replaces them.

    The live rows are what incremental application and the erasure's own
    purge left behind; the rows after the rebuild are a replay of what remains
    in the log.  Equal digests therefore show that replay equals incremental,
    which a second replay compared with the first could not (it only shows
    that replay is deterministic).  The replay's items become the stream's
    snapshot, from which the next proof replays only what changed.
    """
    live = live_digests(tx, [projection], stream_id)[projection.name]
    replay(tx, [projection], stream_id)
    fresh, details = _snapshot_of_replay(tx, projection, stream_id, version)
    return Proof(live, fresh, details)


def _rebuild_then_replay(
    tx: Transaction, projection: Projection, stream_id: int, version: int
) -> Proof:
    """(live, replay) digests when the live rows lag the log: rebuild, then replay once more.

    The lagging rows are no state to compare, so the rebuilt rows are compared
    with a second replay in a savepoint.
    """
    replay(tx, [projection], stream_id)
    live, details = _snapshot_of_replay(tx, projection, stream_id, version)
    fresh = replay_digests(tx, [projection], stream_id)[projection.name]
    return Proof(live, fresh, details)


def _snapshot_of_replay(
    tx: Transaction, projection: Projection, stream_id: int, version: int
) -> tuple[str, dict[str, Any]]:
    """The digest of the whole replay now in the live rows, which becomes the stream's
    snapshot, and what the certificate says of it."""
    items = projection.anchored_digests(tx, stream_id)
    details = take_snapshot(tx, projection, stream_id, version, items)
    return compose_digests(d for _, d in items), details


def mark_request_failed(tx: Transaction, request_id: uuid.UUID, error: str) -> None:
    request = requests.get_request(tx.connection, request_id, lock=True)
    if request is None or request.status == "failed":
        return
    requests.update_request(tx.connection, request_id, status="failed", error=error[:500])
    tx.append_audit(
        AuditEntry(
            "erasure.failed",
            namespace=request.namespace,
            subject_ref=request.subject_key.hex(),
            object_refs={"request_id": str(request_id)},
        )
    )
