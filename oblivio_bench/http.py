"""``oblivio bench http``: store and retrieve through a real HTTP server, beside the facade.

The server is ``oblivio serve --no-workers`` in a subprocess on a free
loopback port, exactly as an operator starts it (uvicorn, the JSON access log,
bearer API keys).  Clients are threads of this process, each with its own
keep-alive connection (the standard library's ``http.client``) and the API
key of its own user.  The remote client (``oblivio.RemoteClient``: httpx,
decoding into the facade's types) runs the same operations against the same
server, one client per thread with the same keys, to measure what an agent
calling the facade remotely pays per call.  The facade baseline runs the same operations through
one ``MemoryClient`` shared by as many threads, which is how an embedding
application would use it.

Each system has a scratch store of its own holding the same data (SQLite
files in a temporary directory, or one database per system on PostgreSQL).
Every (operation, client count) pair runs its rounds with the systems
interleaved, so drift on a shared machine hits both alike, and the report
gives medians and the paired ratio of their throughputs.

The server runs without its worker loops: with them, the vector projection
would run in the background during the store rounds of HTTP only, moving
work between the two operations of one system and not the other.  Without
them both systems project inside the retrieve that needs it.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from appdata import apikeys
from oblivio.bootstrap import migrate, open_memory
from oblivio.client import MemoryClient
from oblivio.memory import commands, queries
from oblivio.memory.context import MemoryContext
from oblivio.remote import RemoteClient
from oblivio.settings import Settings
from oblivio_bench.config import RunConfig
from oblivio_bench.report import (
    PACKAGES,
    load_average,
    machine_heading,
    machine_info,
    render_table,
    write_json_document,
)
from oblivio_bench.scratch import postgres_databases, postgres_version
from oblivio_bench.systems import BenchError
from oblivio_bench.workloads import payload_pool

Operation = Literal["store", "retrieve"]
Call = Callable[[int], None]
#: CPU seconds used so far by this process and by the server process (0 for the facade).
CpuSample = tuple[float, float]
Progress = Callable[[str], None]

OPERATIONS: tuple[Operation, ...] = ("store", "retrieve")
SYSTEMS = ("http", "remote", "facade")
#: The stores: the remote client calls the same server as raw HTTP.
STORES = ("http", "facade")
CLIENTS = (1, 8, 32)
#: HTTP may cost up to 3× the facade at 8 clients: every route pays FastAPI's routing and
#: dependency solving, with no bypass lane (docs/benchmarks.md).
TARGET_CLIENTS, TARGET_OVERHEAD = 8, 3.0

# Sizes at --scale 1: requests per round are shared among the clients, but
# every client makes at least MIN_REQUESTS_PER_CLIENT so that start and finish
# stragglers stay small against the round.  A round lasts about a second at
# the speeds measured here: rounds of 256 requests lasted 0.1-0.25 s, short
# enough for one scheduling hiccup of a shared machine to move a round's ratio.
REQUESTS_PER_ROUND = 1024
MIN_REQUESTS_PER_CLIENT = 32
#: Memories of each retrieving user, stored before timing: retrieval scores
#: every node of the user, so this fixes the work of one retrieve.
SEED_MEMORIES = 50
RETRIEVE_LIMIT = 10

LOOPBACK = "127.0.0.1"
SERVER_START_TIMEOUT_S = 60.0
SERVER_STOP_TIMEOUT_S = 20.0
CLIENT_START_TIMEOUT_S = 120.0
HTTP_TIMEOUT_S = 60.0
#: Key material the composition root reads from the environment itself: the
#: server must see what this process saw when it created the stores.  The
#: API key cache's setting passes too, so a run can measure the server without
#: it (``OBLIVIO_API_KEY_CACHE_SECONDS=0``).
PASSED_VARIABLES = frozenset(
    {
        "OBLIVIO_KEKS",
        "OBLIVIO_SUBJECT_HMAC_KEY",
        "OBLIVIO_ISSUER_KEYS",
        "OBLIVIO_API_KEY_CACHE_SECONDS",
    }
)
HTTP_PACKAGES = ("fastapi", "starlette", "uvicorn", "h11", "httptools", "uvloop")
OVERHEAD_MEANING = (
    "facade requests/s divided by HTTP requests/s of the adjacent round, median over rounds "
    "(2.00: HTTP takes twice as long)"
)
REMOTE_OVERHEAD_MEANING = (
    "facade requests/s divided by RemoteClient requests/s of the adjacent round, median over "
    "rounds: the remote client's cost per call over the in-process facade"
)
CPU_RATIO_MEANING = (
    "CPU time per request of HTTP (clients plus server) divided by the facade's, "
    "adjacent rounds, median over rounds"
)
NOTES = {
    "http": (
        "oblivio serve --no-workers in a subprocess on a loopback port; one keep-alive "
        "http.client connection per client thread, bearer API key of the client's own user; "
        "store = POST /v1/events (answers with the derived node ids), "
        "retrieve = POST /v1/retrieve"
    ),
    "remote": (
        "one oblivio.RemoteClient per client thread against the same server, with the same "
        "keys; store = RemoteClient.store, retrieve = RemoteClient.retrieve (httpx, answers "
        "decoded into the facade's result types)"
    ),
    "facade": (
        "one MemoryClient shared by the client threads of this process; "
        "store = MemoryClient.store, retrieve = MemoryClient.retrieve"
    ),
}

__all__ = ["HttpBenchConfig", "HttpBenchReport", "run_http_bench"]


@dataclass(frozen=True)
class HttpBenchConfig(RunConfig):
    """What to run: backend, rounds, size, clients and the server for scratch databases."""

    clients: tuple[int, ...] = CLIENTS

    def __post_init__(self) -> None:
        super().__post_init__()
        if min(self.clients) < 1:
            raise BenchError("clients must be at least 1")

    def requests_per_client(self, clients: int) -> int:
        share = max(-(-REQUESTS_PER_ROUND // clients), MIN_REQUESTS_PER_CLIENT)
        return max(1, round(share * self.scale))

    @property
    def seed_memories(self) -> int:
        return max(2, round(SEED_MEMORIES * self.scale))

    @property
    def users(self) -> int:
        return max(self.clients)


def writer(client_no: int) -> str:
    return f"writer-{client_no}"


def reader(client_no: int) -> str:
    return f"reader-{client_no}"


def memory_text(n: int) -> str:
    return str(payload_pool()[n % len(payload_pool())]["content"])


# -- results ---------------------------------------------------------------------


@dataclass(frozen=True)
class RoundResult:
    """One timed round of one operation on one system."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    #: CPU time the round cost, per request: this process (clients or facade)
    #: plus, for HTTP, the server process.  None where it cannot be read.
    cpu_ms: float | None
    #: The server process's part of ``cpu_ms`` (0 for the facade).
    server_cpu_ms: float | None

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds

    @classmethod
    def of(cls, seconds: float, latencies: Sequence[float], cpu: CpuSample | None) -> RoundResult:
        ms = sorted(x * 1000 for x in latencies)
        per_request = None if cpu is None else [c * 1000 / len(ms) for c in cpu]
        total = None if per_request is None else sum(per_request)
        server = None if per_request is None else per_request[1]
        p50, p99 = percentile(ms, 50), percentile(ms, 99)
        return cls(len(ms), seconds, p50, p99, statistics.fmean(ms), total, server)

    def to_json(self) -> dict[str, float | None]:
        return {
            "requests": self.requests,
            "seconds": self.seconds,
            "requests_per_s": self.requests_per_s,
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "mean_ms": self.mean_ms,
            "cpu_ms_per_request": self.cpu_ms,
            "server_cpu_ms_per_request": self.server_cpu_ms,
        }


def percentile(ordered: Sequence[float], q: int) -> float:
    """The ``q``-th percentile of sorted values, interpolated between ranks."""
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[q - 1]


@dataclass
class CellResult:
    """Every round of one operation at one client count, per system."""

    operation: Operation
    clients: int
    requests_per_client: int
    rounds: dict[str, list[RoundResult]] = field(default_factory=dict)

    def add(self, system: str, result: RoundResult) -> None:
        self.rounds.setdefault(system, []).append(result)

    def median(self, system: str, figure: Callable[[RoundResult], float]) -> float:
        return statistics.median(figure(r) for r in self.rounds[system])

    def overhead(self, system: str = "http") -> float:
        """Median over rounds of facade req/s over ``system``'s req/s in the adjacent round."""
        pairs = zip(self.rounds[system], self.rounds["facade"], strict=True)
        return statistics.median(f.requests_per_s / h.requests_per_s for h, f in pairs)

    def latency_ratio(self, figure: Callable[[RoundResult], float]) -> float:
        pairs = zip(self.rounds["http"], self.rounds["facade"], strict=True)
        return statistics.median(figure(h) / figure(f) for h, f in pairs)

    def median_cpu_ms(self, system: str, server: bool = False) -> float | None:
        rounds = self.rounds[system]
        values = [r.server_cpu_ms if server else r.cpu_ms for r in rounds]
        known = [v for v in values if v is not None]
        return statistics.median(known) if known else None

    def cpu_ratio(self, system: str = "http") -> float | None:
        """Median over rounds of ``system``'s CPU per request over the facade's, adjacent
        rounds."""
        pairs = zip(self.rounds[system], self.rounds["facade"], strict=True)
        ratios = [h.cpu_ms / f.cpu_ms for h, f in pairs if h.cpu_ms and f.cpu_ms]
        return statistics.median(ratios) if ratios else None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "clients": self.clients,
            "requests_per_client": self.requests_per_client,
            "requests_per_round": self.clients * self.requests_per_client,
        }
        for system, rounds in self.rounds.items():
            document[system] = {
                "median_requests_per_s": self.median(system, lambda r: r.requests_per_s),
                "median_p50_ms": self.median(system, lambda r: r.p50_ms),
                "median_p99_ms": self.median(system, lambda r: r.p99_ms),
                "median_mean_ms": self.median(system, lambda r: r.mean_ms),
                "median_cpu_ms_per_request": self.median_cpu_ms(system),
                "median_server_cpu_ms_per_request": self.median_cpu_ms(system, server=True),
                "rounds": [r.to_json() for r in rounds],
            }
        document["overhead"] = self.overhead()
        document["p50_ratio"] = self.latency_ratio(lambda r: r.p50_ms)
        document["p99_ratio"] = self.latency_ratio(lambda r: r.p99_ms)
        document["cpu_ratio"] = self.cpu_ratio()
        document["remote_overhead"] = self.overhead("remote")
        document["remote_cpu_ratio"] = self.cpu_ratio("remote")
        return document


@dataclass(frozen=True)
class HttpBenchReport:
    """The outcome of one ``oblivio bench http`` run."""

    config: HttpBenchConfig
    machine: Mapping[str, Any]
    results: Sequence[CellResult]

    def target(self) -> dict[str, Any]:
        cells = [c for c in self.results if c.clients == TARGET_CLIENTS]
        overhead = {c.operation: c.overhead() for c in cells}
        return {
            "clients": TARGET_CLIENTS,
            "max_overhead": TARGET_OVERHEAD,
            "overhead": overhead,
            "met": {op: value <= TARGET_OVERHEAD for op, value in overhead.items()},
            "remote_overhead": {c.operation: c.overhead("remote") for c in cells},
        }

    def to_json(self) -> dict[str, Any]:
        c = self.config
        return {
            "benchmark": "oblivio bench http",
            "backend": c.backend,
            "rounds": c.rounds,
            "scale": c.scale,
            "seed_memories_per_user": c.seed_memories,
            "retrieve_limit": RETRIEVE_LIMIT,
            "machine": dict(self.machine),
            "systems": {name: {"notes": notes} for name, notes in NOTES.items()},
            "overhead": OVERHEAD_MEANING,
            "remote_overhead": REMOTE_OVERHEAD_MEANING,
            "cpu_ratio": CPU_RATIO_MEANING,
            "target": self.target(),
            "operations": {
                op: {str(r.clients): r.to_json() for r in self.results if r.operation == op}
                for op in OPERATIONS
            },
        }

    def write_json(self, path: Path) -> None:
        write_json_document(path, self.to_json())

    def table(self) -> str:
        """The human-readable summary printed to stdout."""
        header = ["operation", "clients", "requests/round"]
        for system in SYSTEMS:
            header += [f"{system} req/s", f"{system} p50 ms", f"{system} p99 ms"]
        header += ["overhead", "cpu ratio", "remote overhead", "remote cpu ratio"]
        rows = [_row(cell) for cell in self.results]
        lines = [self._heading(), "", render_table(header, rows), ""]
        lines += _wrapped(f"overhead: {OVERHEAD_MEANING}")
        lines += _wrapped(f"remote overhead: {REMOTE_OVERHEAD_MEANING}")
        lines += _wrapped(f"cpu ratio: {CPU_RATIO_MEANING}")
        lines.append(self._verdict())
        for name, notes in NOTES.items():
            lines += _wrapped(f"{name}: {notes}")
        return "\n".join(lines)

    def _heading(self) -> str:
        m, c = self.machine, self.config
        return (
            machine_heading("oblivio bench http", c.backend, m)
            + f", HTTP parser {m['http_parser']}\n"
            f"medians of {c.rounds} round(s), scale {c.scale:g}, "
            f"{c.seed_memories} memories per retrieving user, systems interleaved round by round"
        )

    def _verdict(self) -> str:
        target = self.target()
        parts = [
            f"{op} {value:.2f}× {'met' if target['met'][op] else 'MISSED'}"
            for op, value in target["overhead"].items()
        ]
        remote = ", ".join(f"{op} {v:.2f}×" for op, v in target["remote_overhead"].items())
        return (
            f"  target (overhead ≤ {TARGET_OVERHEAD:g} at {TARGET_CLIENTS} clients): "
            + (", ".join(parts) or "not measured")
            + f"\n  remote client at {TARGET_CLIENTS} clients: {remote or 'not measured'}"
        )


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, width=100, initial_indent="  ", subsequent_indent="    ")


def _row(cell: CellResult) -> list[str]:
    row = [cell.operation, str(cell.clients), f"{cell.clients * cell.requests_per_client:,}"]
    for system in SYSTEMS:
        row += [
            f"{cell.median(system, lambda r: r.requests_per_s):,.0f}",
            f"{cell.median(system, lambda r: r.p50_ms):.2f}",
            f"{cell.median(system, lambda r: r.p99_ms):.2f}",
        ]
    figures = [
        f"{cell.overhead():.2f}",
        _ratio(cell.cpu_ratio()),
        f"{cell.overhead('remote'):.2f}",
        _ratio(cell.cpu_ratio("remote")),
    ]
    return [*row, *figures]


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


# -- the systems -------------------------------------------------------------------


class Target(Protocol):
    """A way to run the operations: one call per client, each bound to its own user."""

    name: str

    def cpu_seconds(self) -> CpuSample | None:
        """CPU time used so far by the processes doing this system's work."""

    def callers(self, operation: Operation, clients: int) -> AbstractContextManager[list[Call]]:
        """One call per client, released when the block ends."""


class FacadeTarget:
    """The Python facade: one ``MemoryClient`` shared by every client thread."""

    name = "facade"

    def __init__(self, client: MemoryClient) -> None:
        self.client = client

    def cpu_seconds(self) -> CpuSample | None:
        return time.process_time(), 0.0

    @contextmanager
    def callers(self, operation: Operation, clients: int) -> Iterator[list[Call]]:
        op = self._store if operation == "store" else self._retrieve
        yield [_bind(op, n) for n in range(clients)]

    def _store(self, client_no: int, n: int) -> None:
        self.client.store(memory_text(n), user_id=writer(client_no))

    def _retrieve(self, client_no: int, n: int) -> None:
        found = self.client.retrieve(memory_text(n), user_id=reader(client_no))
        _check_found(len(found.results), reader(client_no))


class KeepAliveClient:
    """One keep-alive connection of the standard library, posting JSON with a bearer key.

    Not httpx: the clients share the machine's cores with the server, and
    httpx spent about 1 ms of CPU per request in the client (the standard
    library about 0.3 ms), time the server's figures would otherwise pay for.
    """

    def __init__(self, base_url: str, token: str) -> None:
        address = urlsplit(base_url)
        self.connection = http.client.HTTPConnection(
            address.hostname or LOOPBACK, address.port, timeout=HTTP_TIMEOUT_S
        )
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def post(self, path: str, body: Mapping[str, Any]) -> tuple[int, bytes]:
        self.connection.request("POST", path, body=json.dumps(body), headers=self.headers)
        response = self.connection.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.connection.close()


class HttpTarget:
    """The HTTP API of a running server: one keep-alive connection per client."""

    name = "http"

    def __init__(self, server: RunningServer, tokens: Mapping[str, str]) -> None:
        self.base_url = server.base_url
        self.server_pid = server.pid
        self.tokens = tokens

    def cpu_seconds(self) -> CpuSample | None:
        server = process_cpu_seconds(self.server_pid)
        return None if server is None else (time.process_time(), server)

    @contextmanager
    def callers(self, operation: Operation, clients: int) -> Iterator[list[Call]]:
        with ExitStack() as stack:
            calls = []
            for client_no in range(clients):
                user = writer(client_no) if operation == "store" else reader(client_no)
                http = stack.enter_context(self._client(user))
                op = _http_store if operation == "store" else _http_retrieve
                calls.append(_bind_http(op, http, user))
            yield calls

    def _client(self, user: str) -> AbstractContextManager[KeepAliveClient]:
        return closing(KeepAliveClient(self.base_url, self.tokens[user]))


class RemoteTarget:
    """``oblivio.RemoteClient`` against the same server: one client per thread."""

    name = "remote"

    def __init__(self, http: HttpTarget) -> None:
        self.http = http

    def cpu_seconds(self) -> CpuSample | None:
        return self.http.cpu_seconds()

    @contextmanager
    def callers(self, operation: Operation, clients: int) -> Iterator[list[Call]]:
        with ExitStack() as stack:
            calls = []
            for client_no in range(clients):
                user = writer(client_no) if operation == "store" else reader(client_no)
                remote = RemoteClient(self.http.base_url, self.http.tokens[user])
                stack.enter_context(remote)
                op = _remote_store if operation == "store" else _remote_retrieve
                calls.append(_bind_remote(op, remote, user))
            yield calls


def _bind_remote(
    op: Callable[[RemoteClient, str, int], None], remote: RemoteClient, user: str
) -> Call:
    return lambda n: op(remote, user, n)


def _remote_store(remote: RemoteClient, user: str, n: int) -> None:
    remote.store(memory_text(n), user_id=user)


def _remote_retrieve(remote: RemoteClient, user: str, n: int) -> None:
    found = remote.retrieve(memory_text(n), user_id=user, limit=RETRIEVE_LIMIT)
    _check_found(len(found.results), user)


def _bind(op: Callable[[int, int], None], client_no: int) -> Call:
    return lambda n: op(client_no, n)


def _bind_http(
    op: Callable[[KeepAliveClient, str, int], None], http: KeepAliveClient, user: str
) -> Call:
    return lambda n: op(http, user, n)


def _http_store(http: KeepAliveClient, user: str, n: int) -> None:
    _post(http, "/v1/events", {"content": memory_text(n)}, 201)


def _http_retrieve(http: KeepAliveClient, user: str, n: int) -> None:
    body = {"query": memory_text(n), "limit": RETRIEVE_LIMIT}
    _check_found(len(_post(http, "/v1/retrieve", body, 200)["results"]), user)


def _post(http: KeepAliveClient, path: str, body: Mapping[str, Any], expected: int) -> Any:
    status, content = http.post(path, body)
    if status != expected:
        raise BenchError(f"POST {path} answered {status}: {content[:300]!r}")
    return json.loads(content)


def _check_found(count: int, user: str) -> None:
    if count == 0:
        raise BenchError(f"retrieve found nothing for {user}, whose memories were stored")


# -- one round ------------------------------------------------------------------------


def run_round(
    calls: Sequence[Call], requests_per_client: int, cpu_seconds: Callable[[], CpuSample | None]
) -> RoundResult:
    """Every call in a thread of its own: one untimed warm-up, then the timed requests.

    The warm-up opens each client's connection (and the stores' pooled ones),
    and a barrier starts the clock once every client is ready.  The clock is
    read by the barrier's action, before any client is released: read by this
    thread after the barrier, it could come after clients that had already
    finished a short round (a negative duration on a loaded machine).
    """
    starts: list[tuple[float, CpuSample | None]] = []

    def start_clock() -> None:
        cpu = cpu_seconds()
        starts.append((time.perf_counter(), cpu))

    barrier = threading.Barrier(len(calls) + 1, start_clock, timeout=CLIENT_START_TIMEOUT_S)
    with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="bench-client") as pool:
        futures = [pool.submit(_client, call, requests_per_client, barrier) for call in calls]
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            raise _first_error(futures) from None
        finished = [_result(f) for f in futures]
        cpu_end = cpu_seconds()
    [(start, cpu_start)] = starts
    seconds = max(end for end, _ in finished) - start
    cpu = None
    if cpu_start is not None and cpu_end is not None:
        cpu = (cpu_end[0] - cpu_start[0], cpu_end[1] - cpu_start[1])
    return RoundResult.of(seconds, [x for _, latencies in finished for x in latencies], cpu)


def _client(call: Call, requests: int, barrier: threading.Barrier) -> tuple[float, list[float]]:
    """One client: warm up, wait for the others, time each request; (end, latencies)."""
    try:
        call(requests)
    except BaseException:
        barrier.abort()  # nobody waits for a client that cannot start
        raise
    barrier.wait()
    latencies = []
    for n in range(requests):
        started = time.perf_counter()
        call(n)
        latencies.append(time.perf_counter() - started)
    return time.perf_counter(), latencies


def _result(future: Future[tuple[float, list[float]]]) -> tuple[float, list[float]]:
    error = future.exception()
    if error is not None:
        raise BenchError(f"a client failed: {type(error).__name__}: {error}") from error
    return future.result()


def _first_error(futures: Sequence[Future[Any]]) -> BenchError:
    errors = [f.exception() for f in futures]
    causes = [e for e in errors if e and not isinstance(e, threading.BrokenBarrierError)]
    if causes:
        return BenchError(f"a client could not start: {type(causes[0]).__name__}: {causes[0]}")
    return BenchError("the clients did not start in time")


# -- the run ---------------------------------------------------------------------


def run_http_bench(config: HttpBenchConfig, progress: Progress = lambda _: None) -> HttpBenchReport:
    """Prepare both stores, start the server, time every operation and client count."""
    with tempfile.TemporaryDirectory(prefix="oblivio-bench-http-") as tmp, ExitStack() as stack:
        settings = stack.enter_context(scratch_settings(config, Path(tmp)))
        machine = _machine(config)
        targets = stack.enter_context(open_targets(config, settings, Path(tmp), progress))
        results = [
            measure(config, targets, operation, clients, progress)
            for clients in config.clients
            for operation in OPERATIONS
        ]
        machine["load_average_end"] = load_average()
    return HttpBenchReport(config, machine, results)


def _machine(config: HttpBenchConfig) -> dict[str, Any]:
    server = postgres_version(config.server_url) if config.backend == "postgres" else None
    machine = machine_info(server, packages=(*PACKAGES, *HTTP_PACKAGES))
    machine["http_parser"] = "httptools" if find_spec("httptools") else "h11"
    machine["event_loop"] = "uvloop" if find_spec("uvloop") else "asyncio"
    return machine


@contextmanager
def scratch_settings(config: HttpBenchConfig, directory: Path) -> Iterator[dict[str, Settings]]:
    """Settings of a fresh store per system: a data directory and, on PostgreSQL, a database."""
    with ExitStack() as stack:
        urls: dict[str, str] = {}
        if config.backend == "postgres":
            urls = stack.enter_context(postgres_databases(config.server_url, STORES))
        yield {
            name: Settings(data_dir=directory / name, database_url=urls.get(name))
            for name in STORES
        }


@contextmanager
def open_targets(
    config: HttpBenchConfig, settings: Mapping[str, Settings], directory: Path, progress: Progress
) -> Iterator[dict[str, Target]]:
    """The facade on its store, and the server on the other, both seeded alike."""
    progress("seeding both stores and issuing API keys (not timed)")
    tokens = prepare_server_store(settings["http"], config)
    with ExitStack() as stack:
        client = stack.enter_context(MemoryClient(settings=_migrated(settings["facade"])))
        seed(client.context, config)
        server = stack.enter_context(oblivio_server(settings["http"], directory / "server.log"))
        progress(f"server listening on {server.base_url} (pid {server.pid})")
        http = HttpTarget(server, tokens)
        yield {"http": http, "remote": RemoteTarget(http), "facade": FacadeTarget(client)}


def _migrated(settings: Settings) -> Settings:
    migrate(settings)
    return settings


def prepare_server_store(settings: Settings, config: HttpBenchConfig) -> dict[str, str]:
    """Seed the server's store and give every user a key; the tokens by user."""
    ctx = open_memory(_migrated(settings))
    try:
        seed(ctx, config)
        users = [f(n) for n in range(config.users) for f in (writer, reader)]
        return {user: user_key(ctx, user) for user in users}
    finally:
        ctx.store.close()


def seed(ctx: MemoryContext, config: HttpBenchConfig) -> None:
    """Memories for every retrieving user, projected by one retrieve each."""
    for client_no in range(config.users):
        user = reader(client_no)
        for n in range(config.seed_memories):
            commands.store(ctx, memory_text(n), user_id=user)
        queries.retrieve(ctx, memory_text(0), user_id=user)


def user_key(ctx: MemoryContext, user: str) -> str:
    ref = ctx.store.subject_ref(ctx.namespace, user)
    with ctx.store.transaction() as tx:
        return apikeys.issue(
            tx.connection, "user", user, ref, ctx.clock(), namespace=ctx.namespace
        )[1]


def measure(
    config: HttpBenchConfig,
    targets: Mapping[str, Target],
    operation: Operation,
    clients: int,
    progress: Progress,
) -> CellResult:
    cell = CellResult(operation, clients, config.requests_per_client(clients))
    for round_no in range(1, config.rounds + 1):
        # Alternate which system goes first, so neither always runs right
        # after the other's writes (WAL checkpoints, autovacuum).
        order = SYSTEMS if round_no % 2 else SYSTEMS[::-1]
        for name in order:
            target = targets[name]
            with target.callers(operation, clients) as calls:
                result = run_round(calls, cell.requests_per_client, target.cpu_seconds)
            cell.add(name, result)
            progress(
                f"{operation:<8} {clients:>2} clients round {round_no}/{config.rounds} "
                f"{name:<6} {result.requests_per_s:>8,.0f} req/s  p50 {result.p50_ms:7.2f} ms"
                f"  p99 {result.p99_ms:7.2f} ms"
            )
    return cell


# -- the server ----------------------------------------------------------------------


@dataclass(frozen=True)
class RunningServer:
    base_url: str
    pid: int


@contextmanager
def oblivio_server(settings: Settings, log_path: Path) -> Iterator[RunningServer]:
    """``oblivio serve --no-workers`` on a free loopback port."""
    port = free_port()
    args = [sys.executable, "-c", "from oblivio.cli import main; main()"]
    args += ["--data-dir", str(settings.data_dir)]
    if settings.database_url:
        args += ["--database-url", settings.database_url]
    args += ["serve", "--host", LOOPBACK, "--port", str(port), "--no-workers"]
    with log_path.open("wb") as log:
        # Fixed arguments: this interpreter, our own CLI, paths we created.
        process = subprocess.Popen(  # noqa: S603
            args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=server_env()
        )
    try:
        base_url = f"http://{LOOPBACK}:{port}"
        wait_until_healthy(base_url, process, log_path)
        yield RunningServer(base_url, process.pid)
    except BenchError as e:
        raise BenchError(f"{e}\n--- server output ---\n{_server_output(log_path)}") from e
    finally:
        stop(process)


def server_env() -> dict[str, str]:
    """This environment without oblivio settings (the command line gives them), keys kept."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith("OBLIVIO_") or k in PASSED_VARIABLES
    }


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_healthy(base_url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BenchError(f"the server exited with code {process.returncode}")
        if _answers_health(base_url):
            return
        time.sleep(0.1)
    raise BenchError(f"the server was not healthy in {SERVER_START_TIMEOUT_S:g} s")


def _answers_health(base_url: str) -> bool:
    address = urlsplit(base_url)
    probe = http.client.HTTPConnection(address.hostname or LOOPBACK, address.port, timeout=2.0)
    try:
        probe.request("GET", "/v1/health")
        return probe.getresponse().status == 200
    except OSError:  # not listening yet
        return False
    finally:
        probe.close()


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as a supervisor would; kill it if it does not exit in time."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(SERVER_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def process_cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of another process, from Linux's /proc (else None)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command name: utime and stime are the
    # 12th and 13th, in clock ticks.
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server_output(path: Path, lines: int = 60) -> str:
    """The end of what the server printed, without its access lines (one per request)."""
    text = path.read_text(errors="replace").splitlines()
    return "\n".join([line for line in text if '"request_id"' not in line][-lines:])
