"""PostgreSQL concurrency: writes racing a forget, and rebuild workers racing each other."""

from __future__ import annotations

import functools
import itertools
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from eventstore import Erasure
from eventstore.schema import erasure_requests, events, rebuild_jobs
from oblivio import MemoryClient
from tests._threads import race
from tests.erasure._support import (
    WAIT_SECONDS,
    certificate_rows,
    completed,
    data_key_rows,
    marker,
    raw_rows,
    rebuild_worker,
    run_jobs,
    seed_subject,
    whole_log,
)
from tests.erasure.conftest import Opener
from workers.policy import ErasurePolicy
from workers.rebuild import RebuildWorker

pytestmark = pytest.mark.postgres

ALICE = "alice@example.org"
WRITERS = 4
WRITES_AFTER_FORGET = 5


@dataclass
class Writes:
    """What the writer threads saw: acknowledged writes and errors."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acknowledged: dict[uuid.UUID, str] = field(default_factory=dict)
    started_after_forget: set[uuid.UUID] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)


def writer(
    client: MemoryClient,
    number: int,
    writes: Writes,
    forgotten: threading.Event,
    stop: threading.Event,
) -> None:
    after, deadline = 0, time.monotonic() + WAIT_SECONDS
    for n in range(10_000):
        if stop.is_set() or after >= WRITES_AFTER_FORGET or time.monotonic() > deadline:
            return
        began_after_forget = forgotten.is_set()
        text = f"writer {number} note {n} {marker('race')}"
        try:
            event_id = client.store(text, user_id=ALICE)
        except Exception as e:  # every failure is a finding, reported at the end
            with writes.lock:
                writes.errors.append(f"{type(e).__name__}: {e}")
            return
        with writes.lock:
            writes.acknowledged[event_id] = text
            if began_after_forget:
                writes.started_after_forget.add(event_id)
        if began_after_forget:
            after += 1


def test_writes_racing_a_forget_never_survive_in_the_erased_generation(
    open_pg_client: Opener,
) -> None:
    seed_subject(open_pg_client(), ALICE)
    writing, forgetting = open_pg_client(), open_pg_client()
    writes, forgotten, stop = Writes(), threading.Event(), threading.Event()
    threads = [
        threading.Thread(target=writer, args=(writing, i, writes, forgotten, stop), daemon=True)
        for i in range(WRITERS)
    ]
    for thread in threads:
        thread.start()
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while len(writes.acknowledged) < 3 * WRITERS and time.monotonic() < deadline:
            time.sleep(0.005)
        status = forgetting.forget(ALICE, wait=False)
        forgotten.set()
    finally:
        for thread in threads:
            thread.join(WAIT_SECONDS)
        stop.set()
    assert not any(t.is_alive() for t in threads)
    assert writes.errors == []

    client = open_pg_client()
    run_jobs(client)
    payload = client.verify_certificate(completed(client.erasure_status(status.request_id)))
    stored = raw_rows(client, sa.select(events.c.event_id, events.c.payload))
    assert set(writes.acknowledged) <= {row.event_id for row in stored}, "a write was lost"
    everything = whole_log(client)
    assert {e.event_id for e in everything} == {row.event_id for row in stored}
    log = {e.event_id: e for e in everything if e.stream.namespace == "default"}
    payloads = {row.event_id: row.payload for row in stored}
    first = [e for e in log.values() if e.stream.generation == 1]
    second = [e for e in log.values() if e.stream.generation == 2]
    assert first
    assert second
    # Nothing of the erased generation is readable, and all of it went with the request.
    for event in first:
        assert payloads[event.event_id] is None  # the raw row, too
        assert event.data is None, event
        assert event.metadata is None, event
        assert event.erasure is Erasure.TOMBSTONED
        assert event.erasure_request_id == status.request_id
        assert client.get_event(event.event_id) is None
    assert payload["erasure"]["events_erased"] == len(first)
    assert payload["erasure"]["stream_version_range"] == [1, len(first)]
    # Writes that began once the forget had returned live, readable, in generation 2.
    assert writes.started_after_forget
    for event_id in writes.started_after_forget:
        assert log[event_id].stream.generation == 2
    for event in second:
        assert event.data is not None
        read = client.get_event(event.event_id, user_id=ALICE)
        assert read is not None
        assert read.content == writes.acknowledged[event.event_id]
    assert [v.version for v in sorted(second, key=lambda e: e.version)] == list(
        range(1, len(second) + 1)
    )
    assert len(data_key_rows(client, second[0].stream.stream_id)) == 1
    assert data_key_rows(client, first[0].stream.stream_id) == []
    assert client.context.store.verify().ok


# -- two rebuild workers --------------------------------------------------------------------


@dataclass
class Ledger:
    """(job id, worker, start, end) of every job processed, across workers."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    spans: list[tuple[uuid.UUID, str, float, float]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


class RecordingWorker(RebuildWorker):
    ledger: Ledger

    def _process(self, job: Any) -> None:
        start = time.monotonic()
        time.sleep(0.01)  # widen the window in which a double claim would overlap
        try:
            super()._process(job)
        finally:
            with self.ledger.lock:
                self.ledger.spans.append((job.job_id, self.worker_id, start, time.monotonic()))

    def _record_failure(self, job: Any, error: Exception) -> None:
        with self.ledger.lock:
            self.ledger.failures.append(f"{job.job_id}: {type(error).__name__}: {error}")
        super()._record_failure(job, error)


def recording_worker(client: MemoryClient, name: str, ledger: Ledger) -> RecordingWorker:
    policy = ErasurePolicy(lease=timedelta(seconds=60))
    worker = rebuild_worker(client, policy, RecordingWorker, worker_id=name)
    worker.ledger = ledger
    return worker


def test_two_rebuild_workers_never_process_the_same_job_at_once(
    open_pg_client: Opener,
) -> None:
    client = open_pg_client()
    requests = []
    for n in range(8):
        user = f"user-{n}@example.org"
        event_id = client.store(f"note {marker('job')}", user_id=user)
        client.store(f"another note {marker('job')}", user_id=user)
        if n % 2:
            requests.append(client.delete_event(event_id, wait=False).request_id)
        else:
            requests.append(client.forget(user, wait=False).request_id)
    job_count = 2 * len(requests)
    ledger = Ledger()
    workers = [recording_worker(open_pg_client(), name, ledger) for name in ("w-a", "w-b")]
    ran = race([w.run_pending for w in workers])
    done = dict(zip([w.worker_id for w in workers], ran, strict=True))

    assert ledger.failures == []
    processed = [span[0] for span in ledger.spans]
    assert len(processed) == job_count
    assert len(set(processed)) == job_count, "a job was processed twice"
    assert sum(done.values()) == job_count
    assert all(done[w.worker_id] > 0 for w in workers), done  # both really took part
    by_job: dict[uuid.UUID, list[tuple[str, float, float]]] = {}
    for job_id, worker_id, start, end in ledger.spans:
        by_job.setdefault(job_id, []).append((worker_id, start, end))
    for job_id, spans in by_job.items():
        spans.sort(key=lambda s: s[1])
        for earlier, later in itertools.pairwise(spans):
            assert earlier[2] <= later[1], f"job {job_id} ran on two workers at once"
    for request_id in requests:
        status = client.erasure_status(request_id)
        client.verify_certificate(completed(status))
        assert len(certificate_rows(client, request_id)) == 1
    assert raw_rows(client, _running_jobs()) == []


def _running_jobs() -> Any:
    return sa.select(rebuild_jobs.c.job_id).where(rebuild_jobs.c.status != "done")


# -- erasure requests racing each other ----------------------------------------------------


def delete_requests(client: MemoryClient) -> list[sa.Row[Any]]:
    return raw_rows(
        client, sa.select(erasure_requests).where(erasure_requests.c.kind == "delete_event")
    )


def test_concurrent_forgets_of_one_subject_answer_with_one_request(
    open_pg_client: Opener,
) -> None:
    clients = [open_pg_client() for _ in range(4)]
    seed_subject(clients[0], ALICE)

    answers = race([functools.partial(c.forget, ALICE, wait=False) for c in clients])

    assert [type(a).__name__ for a in answers] == ["ErasureStatus"] * len(clients)
    assert len({a.request_id for a in answers}) == 1
    run_jobs(clients[0])
    assert len(certificate_rows(clients[0], answers[0].request_id)) == 1


def test_concurrent_deletes_of_one_event_answer_with_one_request(
    open_pg_client: Opener,
) -> None:
    clients = [open_pg_client() for _ in range(4)]
    event_id = clients[0].store(f"delete me {marker('twice')}", user_id=ALICE)

    answers = race([functools.partial(c.delete_event, event_id, wait=False) for c in clients])

    assert [type(a).__name__ for a in answers] == ["ErasureStatus"] * len(clients)
    requests = delete_requests(clients[0])
    assert [(r.events_erased) for r in requests] == [1], (
        "a racing delete_event recorded a second request that erased nothing"
    )
    assert len({a.request_id for a in answers}) == 1


def test_delete_event_racing_a_forget_answers_with_a_request(open_pg_client: Opener) -> None:
    deleting, forgetting = open_pg_client(), open_pg_client()
    outcomes = []
    for trial in range(5):
        user = f"racer-{trial}@example.org"
        event_id = deleting.store(f"note {marker('race')}", user_id=user)
        deleted, forgotten = race(
            [
                functools.partial(deleting.delete_event, event_id, wait=False),
                functools.partial(forgetting.forget, user, wait=False),
            ]
        )
        outcomes.append(type(deleted).__name__)
        assert type(forgotten).__name__ == "ErasureStatus"
    # Sequentially, deleting an event that a forget erased answers with the forget's
    # request; a race must not turn that into "event not available".
    assert outcomes == ["ErasureStatus"] * 5
