"""Periodic maintenance under database leases: one runner at a time across processes."""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from apscheduler.job import Job
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from appdata import leases
from oblivio import MemoryClient
from tests._threads import race
from tests.erasure._support import audit_entries, seed_subject, wait_until
from tests.erasure.conftest import Opener
from workers import scheduler
from workers.policy import KeyPolicy
from workers.scheduler import Maintenance, run_exclusively, start_scheduler

TASK = "erasure_test_exclusive"
RUN_FOR = 1.0  # seconds each contender keeps trying


def maintenance_for(client: MemoryClient, owner: str) -> Maintenance:
    ctx = client.context
    return Maintenance(
        store=ctx.store,
        eraser=ctx.eraser,
        retention=[],
        keyring=None,
        key_policy=KeyPolicy(),
        clock=ctx.clock,
        owner=owner,
        snapshots=ctx.snapshots,
    )


class Spans:
    """When each owner was inside the task."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.inside: list[tuple[str, float, float]] = []

    def task(self, maintenance: Maintenance) -> None:
        start = time.monotonic()
        time.sleep(0.05)
        with self.lock:
            self.inside.append((maintenance.owner, start, time.monotonic()))


def test_run_exclusively_never_runs_a_task_twice_at_once(
    open_client: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans = Spans()
    monkeypatch.setitem(scheduler.TASKS, TASK, spans.task)
    contenders = [maintenance_for(open_client(), owner) for owner in ("proc-a", "proc-b")]
    outcomes: dict[str, list[bool]] = {m.owner: [] for m in contenders}

    def contend(maintenance: Maintenance) -> None:
        until = time.monotonic() + RUN_FOR
        while time.monotonic() < until:
            ran = run_exclusively(maintenance, TASK)
            outcomes[maintenance.owner].append(ran)
            time.sleep(0.01 if ran else 0.001)  # after a run, give the other a chance

    assert race([functools.partial(contend, m) for m in contenders]) == [None, None]

    ran = sorted(spans.inside, key=lambda s: s[1])
    assert len(ran) == sum(sum(o) for o in outcomes.values()) >= 2
    for earlier, later in itertools.pairwise(ran):
        assert earlier[2] <= later[1], f"{earlier[0]} and {later[0]} ran the task at once"
    assert all(False in o for o in outcomes.values()), "no contention happened"
    assert all(True in o for o in outcomes.values()), "a released lease was not taken again"


def test_a_lease_of_a_dead_owner_blocks_until_it_expires(
    open_client: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans = Spans()
    monkeypatch.setitem(scheduler.TASKS, TASK, spans.task)
    client = open_client()
    store, now = client.context.store, client.context.clock()
    with store.transaction() as tx:  # taken by a process that then died
        assert leases.try_acquire(tx, TASK, "dead", now, scheduler.LEASE_TTL)
    alive = maintenance_for(client, "alive")

    assert run_exclusively(alive, TASK) is False
    later = maintenance_for(client, "alive")
    later.clock = lambda: client.context.clock() + scheduler.LEASE_TTL + timedelta(seconds=1)
    assert run_exclusively(later, TASK) is True
    assert [s[0] for s in spans.inside] == ["alive"]


def test_the_scheduler_runs_the_overdue_watchdog(open_client: Opener) -> None:
    client = open_client(erasure_deadline_hours=1e-6)
    seed_subject(client, "alice@example.org")
    status = client.forget("alice@example.org", wait=False)
    running = start_scheduler(
        maintenance_for(client, "scheduler-test"),
        {"overdue_watchdog": timedelta(milliseconds=200)},
    )
    try:
        wait_until(
            lambda: (
                client.erasure_status(status.request_id).overdue
                and "erasure.overdue" in [e["entry"]["action"] for e in audit_entries(client)]
            ),
            "the scheduled overdue watchdog",
            timeout=10,
        )
    finally:
        running.shutdown(wait=True)


def test_an_idle_pass_logs_nothing_at_info_and_work_is_still_logged(
    open_client: Opener, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    maintenance = maintenance_for(open_client(), "proc-quiet")
    results = iter([0, None, 3])
    monkeypatch.setitem(scheduler.TASKS, TASK, lambda _m: next(results))
    with caplog.at_level(logging.INFO, logger="workers"):
        for _ in range(3):
            assert run_exclusively(maintenance, TASK)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert lines == [f"periodic task {TASK} done: 3"]


def test_the_idle_periodic_tasks_find_nothing_to_report(open_client: Opener) -> None:
    maintenance = maintenance_for(open_client(), "proc-idle")
    tasks = ("lease_reaper", "retention_sweep", "kek_rotation", "overdue_watchdog")
    for task in (*tasks, "snapshot_builds"):
        assert not scheduler.TASKS[task](maintenance), task


def test_a_restart_after_downtime_runs_each_job_without_missed_run_warnings(
    open_client: Opener, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The job store keeps each job's next run time; after a day down every one of them
    is long past.  A restart runs each job once (coalesced), and says nothing of the
    runs it missed while no process was up."""
    ran = threading.Event()
    monkeypatch.setitem(scheduler.TASKS, TASK, lambda _m: ran.set())
    maintenance = maintenance_for(open_client(), "proc-restarted")
    intervals = {TASK: timedelta(hours=1)}
    # What the store holds after a day down: the job as the last process left it, due
    # a day ago (and not a whole number of intervals ago: the latest run missed is
    # half an hour old).
    jobs = SQLAlchemyJobStore(engine=maintenance.store.engine, tablename=scheduler.JOBSTORE_TABLE)
    idle = BackgroundScheduler(timezone=UTC)  # never started: jobs name it as theirs
    jobs.start(idle, "default")
    down_since = datetime.now(UTC) - timedelta(days=1, minutes=30)
    left = {"coalesce": True, "max_instances": 1, "misfire_grace_time": 1, "executor": "default"}
    stale = Job(
        idle,
        id=f"oblivio.{TASK}",
        func=scheduler.run_task,
        args=[TASK],
        kwargs={},
        trigger=IntervalTrigger(hours=1, timezone=UTC),
        name="run_task",
        next_run_time=down_since,
        **left,
    )
    jobs.add_job(stale)

    with caplog.at_level(logging.WARNING, logger="apscheduler"):
        after = start_scheduler(maintenance, intervals)
        try:
            assert ran.wait(timeout=30), "the restarted scheduler never ran the job"
        finally:
            after.shutdown(wait=True)
    assert [r.getMessage() for r in caplog.records if r.name.startswith("apscheduler")] == []
