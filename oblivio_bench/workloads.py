"""The workloads: each written once against :class:`Session`, timed the same way for every system.

A workload writes fresh streams each round (names carry the round number), so
every round does the same work; read workloads read data their :meth:`seed`
wrote before any timing started.  Payloads are built before the clock starts,
so the figures contain encoding, storage and decoding, not test-data making.
"""

from __future__ import annotations

import abc
import functools
import json
import math
import multiprocessing
import queue
import random
import string
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier, Lock
from threading import BrokenBarrierError
from typing import TypeVar

from oblivio_bench.systems import BenchError, Payload, Session, System

PAYLOAD_BYTES = 140
SEED_BATCH = 100
# Writer processes need a moment to start (spawn re-imports everything) and
# to open their connections; a writer that cannot start within this fails
# the run instead of hanging it.
WRITER_START_TIMEOUT_S = 120.0
WRITER_RUN_TIMEOUT_S = 600.0

T = TypeVar("T")


@dataclass(frozen=True)
class Measurement:
    """One timed round of one workload on one system."""

    events: int
    ops: int
    #: Wall time of the round.
    seconds: float
    #: Time callers spent waiting for their operations, summed over callers
    #: (equal to ``seconds`` with one caller).
    busy_seconds: float

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds

    @property
    def ms_per_op(self) -> float:
        """Mean time one caller waits for one operation."""
        return self.busy_seconds / self.ops * 1000

    def to_json(self) -> dict[str, float]:
        """The round as the JSON documents record it, its rates included."""
        return asdict(self) | {"events_per_s": self.events_per_s, "ms_per_op": self.ms_per_op}


# -- test data -----------------------------------------------------------------


def make_payload(rng: random.Random, size: int = PAYLOAD_BYTES) -> dict[str, object]:
    """A memory-like JSON object whose compact encoding is exactly ``size`` bytes."""
    payload: dict[str, object] = {
        "content": "",
        "kind": "fact",
        "confidence": round(rng.uniform(0.5, 0.99), 2),
        "source": "chat",
    }
    room = size - len(json.dumps(payload, separators=(",", ":")))
    payload["content"] = "".join(rng.choice(string.ascii_lowercase + " ") for _ in range(room))
    return payload


@functools.cache
def payload_pool(size: int = 256) -> tuple[Payload, ...]:
    rng = random.Random(1729)
    return tuple(make_payload(rng) for _ in range(size))


@dataclass(frozen=True)
class Append:
    """One planned transaction: ``payloads`` appended to a stream at ``version``."""

    stream_no: int
    stream: str
    version: int
    payloads: tuple[Payload, ...]


def stream_names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{n}" for n in range(count)]


def plan_appends(streams: Sequence[str], events: int, batch_size: int) -> list[Append]:
    """``events`` events in transactions of ``batch_size``, round-robin over ``streams``."""
    pool = payload_pool()
    versions = [0] * len(streams)
    plan: list[Append] = []
    for tx in range(math.ceil(events / batch_size)):
        stream_no = tx % len(streams)
        size = min(batch_size, events - tx * batch_size)
        payloads = tuple(pool[(tx * batch_size + i) % len(pool)] for i in range(size))
        plan.append(Append(stream_no, streams[stream_no], versions[stream_no], payloads))
        versions[stream_no] += size
    return plan


def run_appends(session: Session, plan: Sequence[Append]) -> None:
    for append in plan:
        session.append(append.stream, append.version, append.payloads)


def read_log(session: Session, events: int, page_size: int) -> int:
    """Read the log from its start until ``events`` were delivered (or it ends)."""
    delivered = 0
    for size in session.log_pages(page_size):
        delivered += size
        if delivered >= events:
            break
    return delivered


def timed(action: Callable[[], T]) -> tuple[float, T]:
    """Wall seconds ``action`` took, and what it returned."""
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


# -- the abstraction -------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Workload(abc.ABC):
    """Something to time, the same way against every system."""

    name: str
    title: str
    #: What one operation is, for the "ms per op" column.
    op: str
    #: The events a round appends or reads (a read-stream workload's: per read).
    events: int
    #: Heavy workloads run half the requested rounds (at least one).
    heavy: bool = False

    @property
    def events_per_round(self) -> int:
        return self.events

    @property
    @abc.abstractmethod
    def ops_per_round(self) -> int: ...

    def rounds(self, requested: int) -> int:
        return max(1, (requested + 1) // 2) if self.heavy else requested

    @abc.abstractmethod
    def seed(self, session: Session) -> None:
        """Write what the workload will read; not timed."""

    @abc.abstractmethod
    def measure(self, system: System, session: Session, round_no: int) -> Measurement:
        """Run one round and time it."""

    def _measurement(self, seconds: float, busy_seconds: float | None = None) -> Measurement:
        busy = seconds if busy_seconds is None else busy_seconds
        return Measurement(self.events_per_round, self.ops_per_round, seconds, busy)


@dataclass(frozen=True, kw_only=True)
class AppendWorkload(Workload):
    """Appends in transactions of ``batch_size`` by one writer or by writer processes."""

    streams: int
    batch_size: int
    writers: int = 1

    @property
    def ops_per_round(self) -> int:
        return math.ceil(self.events / self.batch_size)

    def seed(self, session: Session) -> None:
        """Nothing: every round appends to streams of its own."""

    def measure(self, system: System, session: Session, round_no: int) -> Measurement:
        streams = stream_names(f"{self.name}-{round_no}", self.streams)
        plan = plan_appends(streams, self.events, self.batch_size)
        if self.writers == 1:
            seconds, _ = timed(lambda: run_appends(session, plan))
            return self._measurement(seconds)
        shares = [[a for a in plan if a.stream_no % self.writers == w] for w in range(self.writers)]
        seconds, busy = run_writer_processes(system, shares)
        return self._measurement(seconds, busy)


@dataclass(frozen=True, kw_only=True)
class ReadStreamWorkload(Workload):
    """Reads one whole stream of ``events`` events, ``reads`` times per round."""

    reads: int
    stream: str = "read-stream"

    @property
    def events_per_round(self) -> int:
        return self.events * self.reads

    @property
    def ops_per_round(self) -> int:
        return self.reads

    def seed(self, session: Session) -> None:
        run_appends(session, plan_appends([self.stream], self.events, SEED_BATCH))

    def measure(self, system: System, session: Session, round_no: int) -> Measurement:
        seconds, counts = timed(
            lambda: [session.read_stream(self.stream) for _ in range(self.reads)]
        )
        if set(counts) != {self.events}:
            raise BenchError(f"{system.name} read {counts} events, expected {self.events}")
        return self._measurement(seconds)


@dataclass(frozen=True, kw_only=True)
class ReadLogWorkload(Workload):
    """Reads the first ``events`` events of the global log in pages of ``page_size``."""

    page_size: int
    seed_streams: int

    @property
    def ops_per_round(self) -> int:
        return math.ceil(self.events / self.page_size)

    def seed(self, session: Session) -> None:
        streams = stream_names("read-log", self.seed_streams)
        run_appends(session, plan_appends(streams, self.events, SEED_BATCH))

    def measure(self, system: System, session: Session, round_no: int) -> Measurement:
        seconds, delivered = timed(lambda: read_log(session, self.events, self.page_size))
        if delivered < self.events:
            raise BenchError(
                f"{system.name} delivered only {delivered} of {self.events} events from the "
                "global log (on PostgreSQL, a long transaction in the database holds "
                "oblivio's delivery horizon back)"
            )
        return self._measurement(seconds)


# -- writer processes ------------------------------------------------------------


@dataclass(frozen=True)
class WriterSync:
    """What the writer processes of one round share with the parent."""

    #: Held while a process opens its session: opening may create tables or
    #: functions (eventsourcing's recorders do, on every construction), and
    #: concurrent DDL fails on PostgreSQL with "tuple concurrently updated".
    opening: Lock
    #: Passed when every writer and the parent are ready: the clock starts.
    ready: Barrier
    #: Each writer's busy seconds, or its error as text.
    results: Queue[float | str]

    def fail(self, system: System, error: Exception) -> None:
        # Break the barrier so nobody keeps waiting, and tell the parent why.
        self.ready.abort()
        self.results.put(f"{system.name}: {type(error).__name__}: {error}")

    def result(self, timeout: float) -> float:
        try:
            result = self.results.get(timeout=timeout)
        except queue.Empty as e:
            raise BenchError("a writer process stopped without reporting") from e
        if isinstance(result, str):
            raise BenchError(f"a writer process failed: {result}")
        return result


def run_writer_processes(system: System, shares: Sequence[Sequence[Append]]) -> tuple[float, float]:
    """Run each share in its own ``spawn`` process; return (wall seconds, summed busy seconds).

    Every process opens its own session, then all wait at a barrier, so the
    wall clock starts when the last one is ready and process start-up is not
    timed.
    """
    ctx = multiprocessing.get_context("spawn")
    sync = WriterSync(ctx.Lock(), ctx.Barrier(len(shares) + 1), ctx.Queue())
    processes = [
        ctx.Process(target=_writer_process, args=(system, share, sync), daemon=True)
        for share in shares
    ]
    for process in processes:
        process.start()
    try:
        _wait_for_writers(sync)
        start = time.perf_counter()
        busy = [sync.result(WRITER_RUN_TIMEOUT_S) for _ in processes]
        return time.perf_counter() - start, sum(busy)
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()


def _wait_for_writers(sync: WriterSync) -> None:
    try:
        sync.ready.wait(timeout=WRITER_START_TIMEOUT_S)
    except BrokenBarrierError as e:
        raise BenchError(f"a writer process could not start: {sync.result(5)}") from e


def _writer_process(system: System, share: Sequence[Append], sync: WriterSync) -> None:
    """Body of one writer process: open, wait for the others, append, report."""
    try:
        with sync.opening:
            session = system.open()
    except Exception as e:
        sync.fail(system, e)
        return
    try:
        sync.ready.wait(timeout=WRITER_START_TIMEOUT_S)
        seconds, _ = timed(lambda: run_appends(session, share))
        sync.results.put(seconds)
    except Exception as e:
        sync.fail(system, e)
    finally:
        session.close()
