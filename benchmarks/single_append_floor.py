"""Where a single PostgreSQL append's time goes: oblivio against its own statements.

    python benchmarks/single_append_floor.py [--appends 600] [--database-url URL]

Four systems append one event per transaction to 50 streams each, interleaved
append by append on scratch databases of one server:

- **oblivio**: ``EventStore.append``, the product's one path;
- **eventsourcing**: the library's default PostgreSQL recorder, as in ``oblivio bench
  eventstore --compare eventsourcing``;
- **statements**: oblivio's own four round trips (BEGIN, the stream's row lock as the
  product writes it, the append statement, COMMIT) sent through the same SQLAlchemy
  pool and binary psycopg cursor with ready-made bytes: what is left when oblivio's encoding,
  key unwrapping, encryption, hash chain and returned events cost nothing;
- **design**: the same statements plus the work DESIGN.md asks of every append, done by
  oblivio's own functions (the keyed subject HMAC, canonical JSON, unwrapping the data
  key read with the lock, AES-256-GCM, the digest and hash chain) and the backend's one
  append: what any implementation of this design on this stack could reach, with no
  ``Transaction``, no returned events and no glue between the steps.

It prints each system's median wall time and mean CPU time (this process's, so
the server's work is not in it) per append, and eventsourcing's wall time over
each system's.  The ratio of *statements* bounds what the locked append could
reach with any amount of client-side work removed; what oblivio spends above it
is its own Python; *design* bounds it once the work the design requires is counted.
``benchmarks/eventstore_floor.py`` gives a lower floor, one
that takes no lock and keeps no chain.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Connection

from eventstore.backends.postgres import _append_sql, _compile, binary_cursor
from eventstore.batch import seal_batch
from eventstore.codec import WrappedKey
from eventstore.crypto import AeadKey
from eventstore.model import NewEvent, StreamRef
from eventstore.transaction import _BY_ID_LOCKED
from oblivio_bench.eventsourcing_system import EventsourcingSession, EventsourcingSystem
from oblivio_bench.eventstore import DEFAULT_SERVER_URL, append_parameters
from oblivio_bench.report import load_average
from oblivio_bench.scratch import postgres_databases
from oblivio_bench.systems import EVENT_TYPE, NAMESPACE, OblivioSession, OblivioSystem
from oblivio_bench.workloads import payload_pool

STREAMS = 50
# The log's append statement for a batch of events (arrays), with no derived rows.
_APPEND = _append_sql(False, ())


class OwnStatements:
    """oblivio's single-append statements with bytes made up front, through its own pool."""

    def __init__(self, oblivio: OblivioSession, names: list[str]) -> None:
        store = oblivio.store
        self.engine = store.backend.engine
        self.lock_sql, self.lock_constants = _compile(_BY_ID_LOCKED, self.engine.dialect)
        # Each stream's id, as a process that appended to it before knows it (the
        # product's lock then skips the stream directory's read, as here).
        self.stream_ids: dict[str, int] = {}
        for name in names:
            head = store.head(NAMESPACE, name)
            if head is None:
                raise RuntimeError("a floor stream is missing")
            self.stream_ids[name] = head.stream.stream_id
        self.names = names
        columns = [column.name for column in _BY_ID_LOCKED.selected_columns]
        self.at = {name: columns.index(name) for name in columns}

    @contextmanager
    def locked(self, name: str) -> Iterator[tuple[Connection, Any, Sequence[Any]]]:
        """A transaction holding the stream's row lock: its connection, cursor and row."""
        params = {"stream_id": self.stream_ids[name]}
        with (
            self.engine.connect() as conn,
            conn.begin(),
            binary_cursor(conn) as cursor,
        ):
            cursor.execute(self.lock_sql, self.lock_constants | params)
            row = cursor.fetchone()
            if row is None:
                raise RuntimeError("a floor stream is missing")
            yield conn, cursor, row

    def append(self, i: int) -> None:
        with self.locked(self.names[i % len(self.names)]) as (_, cursor, row):
            stream_id, version = row[self.at["stream_id"]], row[self.at["version"]]
            cursor.execute(_APPEND, append_parameters(_append_params(stream_id, version)))
            if not cursor.fetchall():
                raise RuntimeError("the head moved under the lock")


class DesignWork(OwnStatements):
    """:class:`OwnStatements` plus the per-append work the design requires."""

    def __init__(self, oblivio: OblivioSession, names: list[str]) -> None:
        super().__init__(oblivio, names)
        self.store = oblivio.store
        self.payloads = payload_pool()

    def append(self, i: int) -> None:
        codec, at = self.store.codec, self.at
        name = self.names[i % len(self.names)]
        subject_key = codec.subject_key(NAMESPACE, name)
        encoded = codec.encode_all([NewEvent(EVENT_TYPE, self.payloads[i % len(self.payloads)])])
        with self.locked(name) as (conn, _, row):
            key = WrappedKey(row[at["dek_id"]], row[at["kek_version"]], row[at["wrapped_key"]])
            stream_id, generation = row[at["stream_id"]], row[at["generation"]]
            ref = StreamRef(stream_id, NAMESPACE, subject_key, generation)
            head = (row[at["version"]], row[at["chain_hash"]])
            batch = seal_batch(
                codec, AeadKey(codec.unwrap(key)), ref, head, encoded, datetime.now(UTC)
            )
            if self.store.backend.append(conn, batch, ()) is None:
                raise RuntimeError("the head moved under the lock")


def _append_params(stream_id: int, version: int) -> dict[str, object]:
    return {
        "stream_id": stream_id,
        "old_version": version,
        "past_restriction": False,
        "new_version": version + 1,
        "chain_hash": os.urandom(32),
        "recorded_at": datetime.now(UTC).replace(tzinfo=None),
        "event_ids": [uuid.uuid4()],
        "versions": [version + 1],
        "types": ["memory.stored"],
        "schema_versions": [1],
        "payloads": [os.urandom(190)],
        "digests": [os.urandom(32)],
        "chain_hashes": [os.urandom(32)],
    }


def measure(appends: int, server_url: str) -> dict[str, tuple[list[float], list[float]]]:
    pool = payload_pool()
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="oblivio-split-") as tmp:
        urls = stack.enter_context(postgres_databases(server_url, ["oblivio", "eventsourcing"]))
        oblivio = OblivioSystem.create(Path(tmp) / "oblivio", urls["oblivio"]).open()
        stack.callback(oblivio.close)
        library = EventsourcingSystem.postgres(urls["eventsourcing"]).open()
        stack.callback(library.close)
        names = [f"timed-{n}" for n in range(STREAMS)]
        floor_names = [f"floor-{n}" for n in range(STREAMS)]
        design_names = [f"design-{n}" for n in range(STREAMS)]
        for name in names:
            oblivio.append(name, 0, pool[:1])
            library.append(name, 0, pool[:1])
        for name in floor_names + design_names:
            oblivio.append(name, 0, pool[:1])
        own = OwnStatements(oblivio, floor_names)
        design = DesignWork(oblivio, design_names)

        def appending(session: OblivioSession | EventsourcingSession) -> Callable[[int], None]:
            # The i-th append goes to stream i mod 50, which then holds i // 50 + 1 events.
            return lambda i: session.append(
                names[i % STREAMS], i // STREAMS + 1, pool[i % len(pool) :][:1]
            )

        systems: dict[str, Callable[[int], None]] = {
            "oblivio": appending(oblivio),
            "eventsourcing": appending(library),
            "statements": own.append,
            "design": design.append,
        }
        times: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in systems}
        for i in range(appends):
            for name, append in systems.items():
                cpu, wall = time.process_time(), time.perf_counter()
                append(i)
                times[name][0].append(time.perf_counter() - wall)
                times[name][1].append(time.process_time() - cpu)
        return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=600)
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    args = parser.parse_args(argv)
    start_load = load_average()
    times = measure(args.appends, args.database_url)
    print(
        f"single append on PostgreSQL: {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}, "
        f"{os.cpu_count()} CPUs, load average {start_load} → {load_average()}, "
        f"{args.appends} appends per system, interleaved"
    )
    library_wall = statistics.median(times["eventsourcing"][0])
    print(f"{'system':<14} {'wall ms':>8} {'CPU ms':>7} {'eventsourcing/this':>19}")
    for name, (walls, cpus) in times.items():
        wall = statistics.median(walls)
        print(
            f"{name:<14} {wall * 1000:8.3f} {statistics.mean(cpus) * 1000:7.3f} "
            f"{library_wall / wall:19.2f}"
        )
    print("  wall: median per append; CPU: mean per append, this process only")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
