"""Periodic jobs on APScheduler, with its job store in oblivio's own database.

Every worker process runs a scheduler over the same job store.  APScheduler 3
does not coordinate schedulers that share a store, so each run first takes a
named lease in ``scheduler_leases``: when two processes fire the same job, one
runs it and the other returns at once.  The jobs are idempotent passes, so a
run that follows another one shortly after is harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler

from appdata import leases
from eventstore import EventStore, KeyringFile
from workers.archiving import Archiver
from workers.erasure import Eraser
from workers.job_worker import default_worker_id
from workers.keys import rotate_keks
from workers.maintenance import RetentionPolicy, flag_overdue, reap_leases, sweep_retention
from workers.policy import KeyPolicy
from workers.snapshots import SnapshotBuilder
from workers.webhooks import Webhook

log = logging.getLogger(__name__)

JOBSTORE_TABLE = "apscheduler_jobs"
LEASE_TTL = timedelta(minutes=10)


@dataclass
class Maintenance:
    """What the periodic jobs work on, for this process."""

    store: EventStore
    eraser: Eraser
    retention: Sequence[RetentionPolicy]
    keyring: KeyringFile | None  # None when an external KMS rotates keys
    key_policy: KeyPolicy
    clock: Callable[[], datetime]
    owner: str = field(default_factory=default_worker_id)
    #: Called for each request that passes its deadline (the overdue webhook).
    overdue_webhook: Webhook | None = None
    #: Selective forgetting (off unless OBLIVIO_RETRIEVAL_CAPACITY is set).
    archiver: Archiver | None = None
    #: Enqueues the snapshot builds that are due (workers.snapshots).
    snapshots: SnapshotBuilder | None = None


TASKS: Mapping[str, Callable[[Maintenance], object]] = {
    "lease_reaper": lambda m: reap_leases(m.store, m.clock),
    "retention_sweep": lambda m: sweep_retention(m.store, m.eraser, m.retention, m.clock),
    "kek_rotation": lambda m: (
        None if m.keyring is None else rotate_keks(m.store, m.keyring, m.key_policy, m.clock)
    ),
    "overdue_watchdog": lambda m: flag_overdue(
        m.store, m.clock, None if m.overdue_webhook is None else m.overdue_webhook.deliver
    ),
    "archiving": lambda m: None if m.archiver is None else m.archiver.run(),
    "snapshot_builds": lambda m: None if m.snapshots is None else m.snapshots.enqueue_due(),
}

DEFAULT_INTERVALS: Mapping[str, timedelta] = {
    "lease_reaper": timedelta(seconds=30),
    "retention_sweep": timedelta(hours=1),
    "kek_rotation": timedelta(hours=6),
    "overdue_watchdog": timedelta(minutes=5),
    "archiving": timedelta(hours=1),
    "snapshot_builds": timedelta(minutes=1),
}

#: Every job is an idempotent pass: one that is late (a busy machine, a long pass before
#: it) runs once, however late, rather than being skipped with a warning, and never
#: beside itself.
JOB_DEFAULTS: Mapping[str, object] = {
    "coalesce": True,
    "max_instances": 1,
    "misfire_grace_time": None,
}

# Persistent job stores keep a reference to a module-level function and its
# arguments, never live objects; each process registers its Maintenance here.
_PROCESS: dict[str, Maintenance] = {}


def run_task(task: str) -> None:
    """Run one periodic task if this process can take its lease."""
    maintenance = _PROCESS["maintenance"]
    run_exclusively(maintenance, task)


def run_exclusively(maintenance: Maintenance, task: str) -> bool:
    """Run ``task`` under its lease; False when another process holds it."""
    store, now = maintenance.store, maintenance.clock()
    with store.transaction() as tx:
        taken = leases.try_acquire(tx, task, maintenance.owner, now, LEASE_TTL)
    if not taken:
        return False
    try:
        result = TASKS[task](maintenance)
        # Each task returns what it changed (a count, a report, or None): an idle
        # server runs the lease reaper every 30 s, and a line for every pass that
        # found nothing would bury the lines that matter.
        level = logging.INFO if result else logging.DEBUG
        log.log(level, "periodic task %s done: %s", task, result)
    finally:
        with store.transaction() as tx:
            leases.release(tx.connection, task, maintenance.owner, maintenance.clock())
    return True


def start_scheduler(
    maintenance: Maintenance, intervals: Mapping[str, timedelta] = DEFAULT_INTERVALS
) -> BackgroundScheduler:
    """Start the periodic jobs in a background thread of this process."""
    _PROCESS["maintenance"] = maintenance
    store = SQLAlchemyJobStore(engine=maintenance.store.engine, tablename=JOBSTORE_TABLE)
    scheduler = BackgroundScheduler(
        jobstores={"default": store}, job_defaults=JOB_DEFAULTS, timezone=UTC
    )
    # Added before the start, the jobs replace what the store kept from the last
    # process before the scheduler looks at it: run times that passed while no process
    # was up are not runs this one missed.
    for task, interval in intervals.items():
        scheduler.add_job(
            run_task,
            "interval",
            args=[task],
            id=f"oblivio.{task}",
            replace_existing=True,
            seconds=interval.total_seconds(),
            next_run_time=datetime.now(UTC) + timedelta(seconds=1),
        )
    scheduler.start()
    return scheduler
