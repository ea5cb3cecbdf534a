"""Vector-state rebuild jobs: re-embedding subjects, blue/green, with leases.

An operator starts a job (``oblivio rebuild vectors``, ``POST /v1/admin/rebuilds``).
Changing the embedder records it as the store's *target*: from then on the
vector projection writes every new node's vector with the target too, and the
job embeds the nodes written before.  Work is one unit per subject, claimed
with a lease, so several workers share a job and a crashed worker's unit is
taken over once its lease expires.  Each batch commits the vectors it wrote
with its progress, and a batch only picks nodes that still lack a target
vector: a worker killed mid-job resumes where it stopped, embedding again at
most the batch it had in flight.

Blue/green per subject: retrieval keeps using the current vectors until the
subject's target vectors are complete; then, in one transaction, the subject
switches, its triggers and attractors are re-embedded and its old vectors are
purged.  When the last unit is done the target becomes the store's embedder.

Erasure: every write takes the subject's stream lock, the lock a forget or
``delete_event`` takes first, and only writes vectors for nodes that still
exist under it; a forgotten subject's unit simply ends.  The erasure's own
rebuild job replays what remains with both embedders.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from eventstore import AuditEntry, EventStore, SubjectCipher
from eventstore import jobs as job_queue
from eventstore.errors import ConflictError, InvalidInputError, NotFoundError, OperationalError
from eventstore.transaction import Transaction
from projections.embedders import Embedder
from projections.storage import embedder_store
from projections.storage import vector_rebuilds as jobs
from projections.storage.embedder_store import CURRENT, TARGET, RecordedEmbedder
from projections.storage.vector_rebuilds import RebuildProgress as RebuildProgress
from projections.storage.vector_store import NodeVector, VectorStore
from projections.store_embedders import StoreEmbedders, describe
from workers.job_worker import JobWorker, LeaseLostError, default_worker_id
from workers.projector import ProjectionRunner

log = logging.getLogger(__name__)

DEFAULT_BATCH = 1024
DEFAULT_LEASE = timedelta(seconds=60)
#: How long a unit waits for (and helps) the vector projection to apply a
#: subject's newest events before it gives the unit back (retried later).
APPLY_WAIT_SECONDS = 30.0
MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class RebuildRequest:
    """What to re-embed: one subject or all, with which embedder (``None``: the store's)."""

    embedder: str | None = None
    stream_id: int | None = None  # None: every subject
    requested_by: str | None = None  # pseudonymous actor reference (hex)


class VectorRebuilder(JobWorker):
    """Starts re-embedding jobs and works on their units."""

    def __init__(
        self,
        store: EventStore,
        embedders: StoreEmbedders,
        runner: ProjectionRunner,
        clock: Callable[[], datetime],
        *,
        worker_id: str | None = None,
        batch: int = DEFAULT_BATCH,
        lease: timedelta = DEFAULT_LEASE,
    ) -> None:
        self.store = store
        self.embedders = embedders
        self.runner = runner
        self.clock = clock
        self.worker_id = worker_id or default_worker_id()
        self.batch = batch
        self.lease = lease

    # -- starting and watching ------------------------------------------------------------

    def start(self, request: RebuildRequest) -> uuid.UUID:
        """Create a job (and, to change the embedder, record the target); audit-logged."""
        wanted = request.embedder
        target_embedder = None if wanted is None else self.embedders.build(wanted)
        with self.store.transaction() as tx:
            conn = tx.connection
            roles = embedder_store.recorded(conn)
            target = self._target(roles, target_embedder, request)
            if target.name != roles[CURRENT].name:
                embedder_store.record(conn, TARGET, target, self.clock())
            streams = (
                jobs.embedded_streams(conn) if request.stream_id is None else [request.stream_id]
            )
            scope = "all" if request.stream_id is None else "subject"
            rebuild_id = jobs.create(
                conn, target, scope, streams, request.requested_by, self.clock(), MAX_ATTEMPTS
            )
            tx.append_audit(
                AuditEntry(
                    action="vectors.rebuild.started",
                    actor_ref=request.requested_by,
                    object_refs={"rebuild_id": str(rebuild_id), "embedder": target.name},
                    counts={"subjects": len(streams)},
                )
            )
        return rebuild_id

    def _target(
        self,
        roles: dict[str, RecordedEmbedder],
        embedder: Embedder | None,
        request: RebuildRequest,
    ) -> RecordedEmbedder:
        current, running = roles.get(CURRENT), roles.get(TARGET)
        if current is None:
            raise NotFoundError("this store has no embedder yet: nothing to re-embed")
        if embedder is None:
            return running or current
        target = describe(embedder, request.embedder)
        if running is not None and running.name != target.name:
            raise ConflictError(
                f"a re-embedding to {running.name!r} is running; let it finish first"
            )
        if target.name != current.name and request.stream_id is not None:
            raise InvalidInputError(
                "changing the embedder re-embeds every subject: use --all, not --user"
            )
        return target

    def recent(self, limit: int) -> list[RebuildProgress]:
        """The ``limit`` most recent jobs' progress, newest first (counts only)."""
        with self.store.reading() as view:
            return jobs.recent_progress(view.connection, limit)

    def progress(self, rebuild_id: uuid.UUID) -> RebuildProgress:
        with self.store.reading() as view:
            found = jobs.read_progress(view.connection, rebuild_id)
        if found is None:
            raise NotFoundError(f"no vector rebuild {rebuild_id}")
        return found

    # -- working ---------------------------------------------------------------------------

    def run_once(self) -> bool:
        """Claim one unit and work it to its end; False when none is runnable."""
        with self.store.transaction() as tx:
            unit = jobs.claim(tx.connection, self.worker_id, self.clock(), self.lease)
            job = None if unit is None else jobs.job(tx.connection, unit.request_id)
        if unit is None or job is None:
            return False
        try:
            embedder = self.embedders.named(job.embedder, job.spec)
            self._work(unit.request_id, unit.stream_id, embedder, job.spec)
        except LeaseLostError:
            log.warning("lost the lease of rebuild %s stream %s", job.rebuild_id, unit.stream_id)
        except Exception as exc:
            log.exception("vector rebuild %s stream %s failed", job.rebuild_id, unit.stream_id)
            error, retry = f"{type(exc).__name__}: {exc}", unit.attempts < unit.max_attempts
            with self.store.transaction() as tx:
                jobs.fail_unit(
                    tx.connection, unit.request_id, unit.stream_id, self.worker_id, error, retry
                )
                if not retry:  # surfaces in the job's status; rerunning the job resumes it
                    jobs.finish(tx.connection, unit.request_id, "failed", self.clock(), error)
        return True

    def _work(
        self, rebuild_id: uuid.UUID, stream_id: int, embedder: Embedder, spec: str | None
    ) -> None:
        """Embed the subject's nodes that lack a target vector, in passes over its nodes
        in key order; switch it once a pass from the top finds none left."""
        after: tuple[uuid.UUID, int] | None = None
        wrote = False
        while True:
            with self.store.reading() as view:
                cipher = view.cipher(stream_id)
                rows = (
                    []
                    if cipher is None
                    else jobs.missing_nodes(
                        view.connection, stream_id, embedder.name, self.batch, after
                    )
                )
            if cipher is not None and rows:
                after = (rows[-1].event_id, rows[-1].ordinal)
                ready = [row for row in rows if row.applied]
                if ready:
                    self._write_batch(rebuild_id, stream_id, cipher, embedder, ready)
                    wrote = True
                continue
            if after is None:  # a pass from the top found nothing left
                if self._complete(rebuild_id, stream_id, embedder, spec):
                    return
                continue
            if not wrote:
                # What remains awaits the vector projection, which writes the target's
                # vectors itself: help it along (as a consistent read does).
                self._catch_up(stream_id)
                self._renew(rebuild_id, stream_id)
            after, wrote = None, False

    def _write_batch(
        self,
        rebuild_id: uuid.UUID,
        stream_id: int,
        cipher: SubjectCipher,
        embedder: Embedder,
        rows: Sequence[Any],
    ) -> None:
        texts = [cipher.open("node.content", r.node_id.bytes, r.content).decode() for r in rows]
        embedded = embedder.embed(texts)
        with self.store.transaction() as tx:
            if tx.lock_stream(stream_id) is None:  # forgotten meanwhile
                return
            alive = _existing(tx.connection, stream_id, rows)
            VectorStore(tx.connection).put_vectors(
                [
                    NodeVector(cipher, r.node_id, r.event_id, embedder.name, vector)
                    for r, vector in zip(rows, embedded, strict=True)
                    if r.node_id in alive
                ]
            )
            if not jobs.progress(
                tx.connection,
                rebuild_id,
                stream_id,
                self.worker_id,
                len(alive),
                self.clock(),
                self.lease,
            ):
                raise LeaseLostError()

    def _catch_up(self, stream_id: int) -> None:
        with self.store.reading() as view:
            cursor = job_queue.stream_cursor(view.connection, stream_id)
        if not self.runner.catch_up(cursor, stream_id, APPLY_WAIT_SECONDS):
            raise OperationalError("the vector projection has not applied this subject yet")

    def _renew(self, rebuild_id: uuid.UUID, stream_id: int) -> None:
        with self.store.transaction() as tx:
            if not jobs.progress(
                tx.connection, rebuild_id, stream_id, self.worker_id, 0, self.clock(), self.lease
            ):
                raise LeaseLostError()

    def _complete(
        self, rebuild_id: uuid.UUID, stream_id: int, embedder: Embedder, spec: str | None
    ) -> bool:
        """Switch the subject if it is complete under its lock (False: a write landed
        meanwhile, embed it first) and, after the job's last unit, the store."""
        with self.store.transaction() as tx:
            conn = tx.connection
            locked = tx.lock_stream(stream_id)
            # A projection batch that chose its embedders before the switch must not
            # commit after it (old vectors, a trigger embedded by the old embedder).
            self.runner.hold(conn, [stream_id])
            if locked is not None and locked.closed_at is None and locked.wrapped_key is not None:
                if jobs.missing_nodes(conn, stream_id, embedder.name, 1):
                    return False
                _reembed_probes(conn, tx.locked_cipher(locked), embedder)
                embedder_store.switch_subject(conn, stream_id, embedder.name)
            if not jobs.finish_unit(conn, rebuild_id, stream_id, self.worker_id, self.clock()):
                raise LeaseLostError()
            if jobs.open_units(conn, rebuild_id) == 0:
                self._finish_job(tx, rebuild_id, describe(embedder, spec), embedder)
        return True

    def _reembed_unswitched_probes(self, tx: Transaction, embedder: Embedder) -> None:
        """Triggers and attractors of subjects no unit switched (new since the job
        started): the serving embedder wrote their vectors, the target's serve next."""
        for stream_id in embedder_store.unswitched_probe_streams(tx.connection):
            cipher = tx.cipher(stream_id)
            if cipher is not None:  # a destroyed key's rows are purged with it
                _reembed_probes(tx.connection, cipher, embedder)

    def _finish_job(
        self, tx: Transaction, rebuild_id: uuid.UUID, target: RecordedEmbedder, embedder: Embedder
    ) -> None:
        """The job's last unit is done: the target becomes the store's embedder."""
        conn = tx.connection
        if not jobs.finish(conn, rebuild_id, "done", self.clock()):
            return
        purged = 0
        if embedder_store.recorded(conn)[CURRENT].name != target.name:
            # Every subject changes embedder now, switched or not: no batch in flight.
            self.runner.hold(conn)
            self._reembed_unswitched_probes(tx, embedder)
            purged = embedder_store.promote_target(conn, target, self.clock())
        progress = jobs.read_progress(conn, rebuild_id)
        tx.append_audit(
            AuditEntry(
                action="vectors.rebuild.finished",
                object_refs={"rebuild_id": str(rebuild_id), "embedder": target.name},
                counts={
                    "subjects": progress.subjects_total if progress else 0,
                    "nodes_embedded": progress.nodes_embedded if progress else 0,
                    "old_vectors_purged": purged,
                },
            )
        )


def _existing(conn: sa.Connection, stream_id: int, rows: Sequence[Any]) -> set[uuid.UUID]:
    """Which of the nodes ``rows`` name still exist."""
    found = jobs.existing_nodes(conn, stream_id, {row.event_id for row in rows})
    return {row.node_id for row in rows} & found


def _reembed_probes(conn: sa.Connection, cipher: SubjectCipher, embedder: Embedder) -> None:
    """Triggers and attractors of the subject, with their vectors from ``embedder``."""
    store = VectorStore(conn)
    for row, body in store.stream_triggers(cipher):
        if body.get("text"):
            body["vector"] = embedder.embed([body["text"]])[0]
            store.add_trigger(cipher, row.trigger_id, row.event_id, body, row.weight, row.threshold)
    for row, body in store.stream_attractors(cipher):
        body["vector"] = embedder.embed([body["text"]])[0]
        store.add_attractor(cipher, row.attractor_id, row.event_id, body, row.severity)
