"""How close can any store get?  oblivio, eventsourcing and a bare-driver floor in one run.

    python benchmarks/eventstore_floor.py [--backend sqlite|postgres] [--rounds 5]
        [--scale 1] [--database-url URL] [--json PATH] [--no-gc]

``oblivio bench eventstore --compare eventsourcing`` says how oblivio's log
compares with the eventsourcing library.  This script adds a third system to
the same five workloads, interleaved round by round with the other two: the
*floor*, the least a store can do per event and still keep the promise
DESIGN.md makes about content at rest.  Its ratio to eventsourcing is an upper
bound on any ratio oblivio's log could reach on this machine with this stack
(CPython, the driver, ``cryptography``'s AES-GCM, orjson), whatever else it
changed.

Per event the floor does only this:

- append: encode the payload with orjson, seal it with AES-256-GCM under one
  process-wide key (associated data: the event id), hash the ciphertext with
  SHA-256, and insert one row per event in one transaction per append;
- read: fetch five columns (version, event id, type, recorded time,
  ciphertext), open the ciphertext, parse it with orjson and keep a tuple.

What it leaves out, and oblivio's log must not: per-subject data keys and
their unwrapping, the subject HMAC, the stream head with its per-stream lock
and hash chain, idempotent event ids, metadata, validation and typed errors,
value objects, and on PostgreSQL the gap-safe global order (its log read is a
plain ``position >`` scan).  The floor writes with the durability oblivio uses
(SQLite: WAL with ``synchronous=FULL``; PostgreSQL: the server's defaults).

The script talks to the drivers directly (``sqlite3``, psycopg): that is
what a floor is.  It lives outside the packages so that nothing in oblivio
depends on it.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from hashlib import sha256
from pathlib import Path
from typing import Any, ClassVar

import orjson
import psycopg
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from oblivio_bench.eventsourcing_system import EventsourcingSystem
from oblivio_bench.eventstore import DEFAULT_SERVER_URL, run_workloads, standard_workloads
from oblivio_bench.report import WorkloadResult, load_average
from oblivio_bench.scratch import postgres_databases
from oblivio_bench.systems import EVENT_TYPE, OblivioSystem, Payload, System

NONCE = 12
#: The targets: oblivio events/s over eventsourcing's, per backend and workload (every
#: PostgreSQL row at least level with eventsourcing).
TARGETS: dict[str, dict[str, float]] = {
    "postgres": dict.fromkeys(
        ("append_single", "append_batch", "append_4_writers", "read_stream", "read_log"), 1.0
    ),
    "sqlite": {"append_single": 1.0},
}

_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS floor_events (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    stream TEXT NOT NULL,
    version INTEGER NOT NULL,
    event_id BLOB NOT NULL,
    type TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    payload BLOB NOT NULL,
    digest BLOB NOT NULL,
    UNIQUE (stream, version)
)
"""
_POSTGRES_SCHEMA = """
CREATE TABLE IF NOT EXISTS floor_events (
    position BIGSERIAL PRIMARY KEY,
    stream TEXT NOT NULL,
    version INTEGER NOT NULL,
    event_id UUID NOT NULL,
    type TEXT NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL,
    payload BYTEA NOT NULL,
    digest BYTEA NOT NULL,
    UNIQUE (stream, version)
)
"""
_COLUMNS = "stream, version, event_id, type, recorded_at, payload, digest"
_READ_COLUMNS = "version, event_id, type, recorded_at, payload"


class Sealer:
    """AES-256-GCM under one key, the event id as associated data."""

    def __init__(self, key: bytes) -> None:
        aead = AESGCM(key)
        self.encrypt, self.decrypt = aead.encrypt, aead.decrypt

    def seal(self, event_ids: Sequence[bytes], payloads: Sequence[Payload]) -> list[bytes]:
        nonces = os.urandom(NONCE * len(payloads))
        encrypt, dumps = self.encrypt, orjson.dumps
        return [
            nonce + encrypt(nonce, dumps(payload), event_id)
            for nonce, event_id, payload in zip(
                (nonces[i : i + NONCE] for i in range(0, len(nonces), NONCE)),
                event_ids,
                payloads,
                strict=True,
            )
        ]

    def open_all(
        self, rows: Iterable[Sequence[Any]], id_bytes: Callable[[Any], bytes]
    ) -> list[tuple[Any, ...]]:
        """``(version, event id, type, recorded at, data)`` of each row."""
        decrypt, loads = self.decrypt, orjson.loads
        return [
            (
                version,
                event_id,
                type_,
                recorded_at,
                loads(decrypt(payload[:NONCE], payload[NONCE:], id_bytes(event_id))),
            )
            for version, event_id, type_, recorded_at, payload in rows
        ]


class SqliteFloor:
    """The floor on one SQLite file (one connection, explicit transactions)."""

    def __init__(self, path: Path, key: bytes) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute(_SQLITE_SCHEMA)
        self.sealer = Sealer(key)
        self._times: dict[float, datetime] = {}

    def append(self, stream: str, version: int, payloads: Sequence[Payload]) -> None:
        ids = [os.urandom(16) for _ in payloads]
        sealed = self.sealer.seal(ids, payloads)
        now = time.time()
        rows = [
            (stream, version + n, event_id, EVENT_TYPE, now, blob, sha256(blob).digest())
            for n, (event_id, blob) in enumerate(zip(ids, sealed, strict=True), start=1)
        ]
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.executemany(
                f"INSERT INTO floor_events ({_COLUMNS}) VALUES (?,?,?,?,?,?,?)", rows
            )
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def read_stream(self, stream: str) -> int:
        rows = self.conn.execute(
            f"SELECT {_READ_COLUMNS} FROM floor_events WHERE stream = ? ORDER BY version",
            (stream,),
        )
        return len(self._decode(rows))

    def log_pages(self, page_size: int) -> Iterator[int]:
        last = 0
        while True:
            rows = self.conn.execute(
                f"SELECT position, {_READ_COLUMNS} FROM floor_events WHERE position > ? "
                "ORDER BY position LIMIT ?",
                (last, page_size),
            ).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield len(self._decode(row[1:] for row in rows))

    def _decode(self, rows: Iterable[Sequence[Any]]) -> list[tuple[Any, ...]]:
        # The model hands out UUIDs and aware datetimes; SQLite stores bytes and
        # floats, so the floor converts them too (one datetime per distinct time).
        times, to_time = self._times, datetime.fromtimestamp
        converted = (
            (
                version,
                uuid.UUID(bytes=raw_id),
                type_,
                times.get(at) or times.setdefault(at, to_time(at, UTC)),
                payload,
            )
            for version, raw_id, type_, at, payload in rows
        )
        return self.sealer.open_all(converted, _uuid_bytes)

    def close(self) -> None:
        self.conn.close()


def _uuid_bytes(event_id: uuid.UUID) -> bytes:
    return event_id.bytes


class PostgresFloor:
    """The floor on one PostgreSQL database: one autocommit connection, binary rows."""

    _INSERT = f"INSERT INTO floor_events ({_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s)"

    def __init__(self, url: str, key: bytes) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(_POSTGRES_SCHEMA)
        self.sealer = Sealer(key)

    def append(self, stream: str, version: int, payloads: Sequence[Payload]) -> None:
        ids = [uuid.uuid4() for _ in payloads]
        sealed = self.sealer.seal([i.bytes for i in ids], payloads)
        now = datetime.now(UTC)
        rows = [
            (stream, version + n, event_id, EVENT_TYPE, now, blob, sha256(blob).digest())
            for n, (event_id, blob) in enumerate(zip(ids, sealed, strict=True), start=1)
        ]
        with self.conn.cursor(binary=True) as cursor:
            if len(rows) == 1:  # autocommit: one round trip, one commit
                cursor.execute(self._INSERT, rows[0], prepare=True)
                return
            with self.conn.transaction():
                cursor.executemany(self._INSERT, rows)

    def read_stream(self, stream: str) -> int:
        with self.conn.cursor(binary=True) as cursor:
            cursor.execute(
                f"SELECT {_READ_COLUMNS} FROM floor_events WHERE stream = %s ORDER BY version",
                (stream,),
                prepare=True,
            )
            return len(self.sealer.open_all(cursor.fetchall(), _uuid_bytes))

    def log_pages(self, page_size: int) -> Iterator[int]:
        last = 0
        while True:
            with self.conn.cursor(binary=True) as cursor:
                cursor.execute(
                    f"SELECT position, {_READ_COLUMNS} FROM floor_events WHERE position > %s "
                    "ORDER BY position LIMIT %s",
                    (last, page_size),
                    prepare=True,
                )
                rows = cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield len(self.sealer.open_all((row[1:] for row in rows), _uuid_bytes))

    def close(self) -> None:
        self.conn.close()


@dataclass(frozen=True)
class FloorSystem:
    """The floor on a SQLite file or a PostgreSQL database; picklable for writer processes."""

    key: bytes
    sqlite_path: Path | None = None
    database_url: str | None = None
    name: ClassVar[str] = "floor"
    notes: ClassVar[str] = (
        "the bare driver: per event orjson, AES-256-GCM under one key (event id as "
        "associated data), SHA-256 of the ciphertext, one row; no keys per subject, no stream "
        "head, chain, idempotency or gap-safe order"
    )

    def open(self) -> SqliteFloor | PostgresFloor:
        if self.database_url is not None:
            return PostgresFloor(self.database_url, self.key)
        assert self.sqlite_path is not None
        return SqliteFloor(self.sqlite_path, self.key)


def scratch_systems(
    stack: ExitStack, backend: str, server_url: str, directory: Path
) -> list[System]:
    """oblivio, eventsourcing and the floor, each on a fresh database of its own."""
    key = AESGCM.generate_key(bit_length=256)
    if backend == "sqlite":
        return [
            OblivioSystem.create(directory / "oblivio", None),
            EventsourcingSystem.sqlite(directory / "eventsourcing.sqlite3"),
            FloorSystem(key, sqlite_path=directory / "floor.sqlite3"),
        ]
    urls = stack.enter_context(
        postgres_databases(server_url, ["oblivio", "eventsourcing", "floor"])
    )
    floor = FloorSystem(key, database_url=urls["floor"])
    floor.open().close()  # create its table once, before writer processes race to
    return [
        OblivioSystem.create(directory / "oblivio", urls["oblivio"]),
        EventsourcingSystem.postgres(urls["eventsourcing"]),
        floor,
    ]


def summary(backend: str, results: Sequence[WorkloadResult]) -> list[dict[str, Any]]:
    """Per workload: the medians and the paired ratios to eventsourcing."""
    targets = TARGETS[backend]
    return [
        {
            "workload": r.workload.name,
            "title": r.workload.title,
            "target": targets.get(r.workload.name),
            "events_per_s": {
                name: round(r.median_events_per_s(name))
                for name in ("oblivio", "eventsourcing", "floor")
            },
            "oblivio_ratio": round(r.ratio("oblivio", "eventsourcing"), 3),
            "floor_ratio": round(r.ratio("floor", "eventsourcing"), 3),
            "oblivio_of_floor": round(r.ratio("oblivio", "floor"), 3),
        }
        for r in results
    ]


def render(rows: Sequence[dict[str, Any]]) -> str:
    header = f"{'workload':<40} {'target':>6} {'oblivio':>9} {'floor':>9} {'oblivio/floor':>14}"
    lines = [header, "-" * len(header)]
    for row in rows:
        target = "" if row["target"] is None else f"{row['target']:.1f}"
        lines.append(
            f"{row['title']:<40} {target:>6} {row['oblivio_ratio']:>9.2f} "
            f"{row['floor_ratio']:>9.2f} {row['oblivio_of_floor']:>14.2f}"
        )
    lines += [
        "",
        "  oblivio, floor: events/s over eventsourcing's in the same round, median over rounds",
        "  oblivio/floor: oblivio's events/s over the floor's, median over rounds",
        "  a target above the floor's ratio is out of reach of any store built on this stack here",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--no-gc",
        action="store_true",
        help="pause Python's garbage collector while rounds are timed (as the bench's --no-gc)",
    )
    args = parser.parse_args(argv)
    start_load = load_average()
    with tempfile.TemporaryDirectory(prefix="oblivio-floor-") as tmp, ExitStack() as stack:
        systems = scratch_systems(stack, args.backend, args.database_url, Path(tmp))
        results = run_workloads(
            standard_workloads(args.scale),
            systems,
            args.rounds,
            lambda line: print(line, file=sys.stderr),
            gc_in_rounds=not args.no_gc,
        )
    rows = summary(args.backend, results)
    print(
        f"eventstore floor on {args.backend}: {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ}, "
        f"{os.cpu_count()} CPUs, load average {start_load} → {load_average()}, "
        f"rounds {args.rounds} (heavy workloads half), scale {args.scale:g}"
        + (", garbage collector paused in timed rounds" if args.no_gc else "")
    )
    print(render(rows))
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
