"""Rebuild workers that die or stall: leases expire, another worker finishes the job,
and the request still gets exactly one certificate."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from eventstore import jobs as job_queue
from oblivio import MemoryClient
from oblivio.settings import Settings
from tests.erasure._support import (
    WAIT_SECONDS,
    W,
    certificate_rows,
    completed,
    marker,
    rebuild_worker,
    run_jobs,
    seed_subject,
    wait_until,
)
from tests.erasure.conftest import Opener
from workers.erasure import ErasureStatus
from workers.policy import ErasurePolicy
from workers.rebuild import RebuildWorker

ROOT = Path(__file__).resolve().parents[2]
ALICE = "alice@example.org"


def start_worker(settings: Settings, tmp_path: Path, **config: Any) -> subprocess.Popen[str]:
    """Start ``tests.erasure._worker`` in a process of its own."""
    config["settings"] = {
        "data_dir": str(settings.data_dir),
        "database_url": settings.database_url,
        "keyring_path": str(settings.keyring_path),
    }
    log = (tmp_path / f"{config['worker_id']}.log").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "tests.erasure._worker", json.dumps(config)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.kill()
    process.wait(timeout=WAIT_SECONDS)


def test_killed_worker_lease_expires_and_another_worker_finishes(
    store_settings: Settings, open_client: Opener, tmp_path: Path
) -> None:
    client = open_client()
    seed_subject(client, ALICE)
    status = client.forget(ALICE, wait=False)
    request_id = str(status.request_id)
    progress = tmp_path / "progress"

    first = start_worker(
        store_settings,
        tmp_path,
        worker_id="doomed",
        lease=1.0,
        stall=60.0,
        progress=str(progress),
        run_for=WAIT_SECONDS,
    )
    second = None
    try:
        # The doomed worker has claimed a job and sits inside its rebuild transaction.
        wait_until(progress.exists, "the first worker to start a job")
        running = [j for j in client.erasure_status(request_id).jobs if j.status == "running"]
        assert len(running) == 1, client.erasure_status(request_id).jobs
        assert running[0].attempts == 1
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(timeout=WAIT_SECONDS) == -signal.SIGKILL
        assert client.erasure_status(request_id).status == "rebuilding"

        second = start_worker(
            store_settings,
            tmp_path,
            worker_id="rescuer",
            lease=30.0,
            until_request=request_id,
            run_for=WAIT_SECONDS,
        )
        assert second.wait(timeout=WAIT_SECONDS + 10) == 0, (tmp_path / "rescuer.log").read_text()
    finally:
        stop(first)
        if second is not None:
            stop(second)

    final = client.erasure_status(request_id)
    payload = client.verify_certificate(completed(final))
    assert all(p["equal"] for p in payload["projections"])
    assert len(certificate_rows(client, status.request_id)) == 1
    by_name = {j.projection: j for j in final.jobs}
    assert by_name[running[0].projection].attempts == 2  # claimed again after the lease expired
    assert {j.status for j in final.jobs} == {"done"}
    assert run_jobs(client) == 0


class FailureRecordingWorker(RebuildWorker):
    """Remembers the type of every error one of its jobs failed with."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.failures: list[str] = []

    def _record_failure(self, job: Any, error: Exception) -> None:
        self.failures.append(type(error).__name__)
        super()._record_failure(job, error)


class StallingWorker(FailureRecordingWorker):
    """Waits (outside any transaction) for a signal before doing each job.

    It renews no lease while it waits: it stands for a worker that froze (SIGSTOP,
    a swapped-out host) with its heartbeat thread, so its lease lapses.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claimed = threading.Event()
        self.resume = threading.Event()

    def _keep_lease(self, job_id: uuid.UUID) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def _process(self, job: Any) -> None:
        self.claimed.set()
        assert self.resume.wait(WAIT_SECONDS)
        super()._process(job)


def pending_deletion(client: MemoryClient, what: str) -> ErasureStatus:
    """A memory of ALICE's whose deletion is requested, its jobs not yet worked on."""
    event_id = client.store(f"Memory to delete: {marker(what)}", user_id=ALICE)
    return client.delete_event(event_id, wait=False)


def worker_for(
    client: MemoryClient, worker_id: str, lease: timedelta, cls: type[W] = RebuildWorker
) -> W:
    return rebuild_worker(client, ErasurePolicy(lease=lease), cls, worker_id=worker_id)


def test_a_stalled_worker_that_lost_its_lease_cannot_finish_or_certify_twice(
    open_client: Opener,
) -> None:
    client = open_client()
    status = pending_deletion(client, "stall")
    stalled = worker_for(open_client(), "stalled", timedelta(milliseconds=300), StallingWorker)
    rescuer = worker_for(open_client(), "rescuer", timedelta(seconds=30))

    thread = threading.Thread(target=stalled.run_once, daemon=True)
    thread.start()
    try:
        assert stalled.claimed.wait(WAIT_SECONDS)
        time.sleep(0.5)  # the stalled worker's lease expires
        assert rescuer.run_pending() == 2
        certificate = completed(client.erasure_status(status.request_id))
    finally:
        stalled.resume.set()
        thread.join(WAIT_SECONDS)
    assert not thread.is_alive()

    assert stalled.failures == ["LeaseLostError"]
    final = client.erasure_status(status.request_id)
    assert final.certificate == certificate
    assert {j.status for j in final.jobs} == {"done"}
    assert len(certificate_rows(client, status.request_id)) == 1


class SlowWorker(FailureRecordingWorker):
    """Takes ``work`` seconds over each job, outside any transaction, heartbeats running."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.work = 0.0
        self.jobs: list[uuid.UUID] = []

    def _process(self, job: Any) -> None:
        self.jobs.append(job.job_id)
        time.sleep(self.work)
        super()._process(job)


def test_two_live_workers_never_do_the_same_job_however_long_it_takes(
    open_client: Opener,
) -> None:
    client = open_client()
    status = pending_deletion(client, "slow")
    # Each job takes 2.5 leases.  The lease leaves its heartbeats (a third of it) room
    # for a busy machine: at 600 ms, one beat held up 400 ms by the scheduler or
    # SQLite's writer lock lost a live worker its lease at a load average of 8.
    lease = timedelta(milliseconds=1500)
    slow = [worker_for(open_client(), name, lease, SlowWorker) for name in ("first", "second")]
    for worker in slow:
        worker.work = 3.75
    stop = threading.Event()
    threads = [threading.Thread(target=w.run_forever, args=(stop, 0.05)) for w in slow]
    for thread in threads:
        thread.start()
    try:
        wait_until(
            lambda: client.erasure_status(status.request_id).status == "completed",
            "both jobs to finish",
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(WAIT_SECONDS)

    first, second = slow
    assert first.failures == second.failures == []  # no lease was lost
    assert not set(first.jobs) & set(second.jobs)  # no job was taken from a live worker
    final = client.erasure_status(status.request_id)
    assert [j.attempts for j in final.jobs] == [1, 1]
    assert len(certificate_rows(client, status.request_id)) == 1


def test_a_killed_workers_job_is_taken_over_within_15_seconds(
    store_settings: Settings, open_client: Opener, tmp_path: Path
) -> None:
    """With the default lease: the heartbeats stop with the worker, the lease lapses."""
    client = open_client()
    event_id = client.store(f"Crash me {marker('crash')}", user_id=ALICE)
    status = client.delete_event(event_id, wait=False)
    progress = tmp_path / "progress"
    doomed = start_worker(
        store_settings,
        tmp_path,
        worker_id="doomed-default",
        stall=60.0,
        progress=str(progress),
        run_for=WAIT_SECONDS,
    )
    rescuer = None
    try:
        # The file is created, then written: wait for the whole id.
        wait_until(
            lambda: progress.exists() and len(progress.read_text()) == 36,
            "the first worker to start a job",
        )
        job_id = progress.read_text()
        time.sleep(1.0)  # the doomed worker beats at least once where its backend allows
        os.kill(doomed.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        rescuer = start_worker(
            store_settings,
            tmp_path,
            worker_id="rescuer-default",
            until_request=str(status.request_id),
            run_for=WAIT_SECONDS,
        )

        def taken_over() -> bool:
            with client.context.store.reading() as view:
                job = job_queue.get(view.connection, uuid.UUID(job_id))
            return job is not None and job.attempts == 2

        wait_until(taken_over, "the rescuer to claim the dead worker's job")
        took = time.monotonic() - killed_at
        print(f"the dead worker's job was taken over {took:.1f} s after the kill")
        log = (tmp_path / "rescuer-default.log").read_text
        assert rescuer.wait(timeout=WAIT_SECONDS) == 0, log()
    finally:
        stop(doomed)
        if rescuer is not None:
            stop(rescuer)
    assert took <= 15.0, f"the dead worker's job waited {took:.1f} s"
    assert client.erasure_status(status.request_id).status == "completed"
