"""The cheapest ``store()`` this design allows, against an older tree's ``store()``.

    python benchmarks/store_floor.py OLD_TREE [--backend sqlite|postgres]
        [--rounds 10] [--batch 200] [--users 4] [--database-url URL]

Two long-lived processes take turns storing batches of memories, as in
``benchmarks/store_ab.py`` (A B, then B A; run it from a directory outside
both trees, each with its own ``.venv``):

- **old**: ``MemoryClient.store`` of ``OLD_TREE`` (``c3f67e5`` for issue 33);
- **floor**: this tree's own functions for the work DESIGN.md asks of every
  store, and nothing else: the input checks and effective time
  (``stored_data``), the subject's keyed HMAC, canonical JSON of the event,
  AES-256-GCM under the data key, digest and hash chain (``seal_batch``), the
  graph rows (the extractor's nodes, their content sealed under the data
  key, the source row and the directory entry), the restriction of processing
  checked where the head moves, and the write itself sent with the driver
  directly at the head the process cached (stream version, chain hash,
  unwrapped key; re-read only when the conditional write finds the head moved):

  - PostgreSQL: ONE autocommitted statement, the head's conditional UPDATE
    with the event and the graph rows as data-modifying CTEs, prepared,
    on a connection of the backend's autocommit pool (one wait);
  - SQLite: ``BEGIN IMMEDIATE``, the conditional UPDATE, the four INSERTs and
    ``COMMIT`` through ``sqlite3`` on a connection of the backend's pool.

  What the floor leaves out that the product does: the idempotency lookup of
  a caller-chosen request id (none here), the returned ``RecordedEvent`` and
  node ids, SQLAlchemy's execution of any statement, the transaction object.

The restriction is checked where the head moves, on the stream row's
``restricted`` flag, as the product's append does (see eventstore.schema.streams:
a conditional write under READ COMMITTED sees a restriction only there).

It prints the per-round ratio floor / old (above 1: the floor stores faster),
the medians of each side's rate and CPU per store (this process's time: the
server's work is not in it), and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.dialects import sqlite

from eventstore import NewEvent, Subject
from eventstore.backends import sqlite as sqlite_backend
from eventstore.backends.port import head_params
from eventstore.batch import encode_batch, event_rows, recorded_events, seal_batch
from eventstore.codec import SubjectCipher
from eventstore.model import ANY
from eventstore.schema import events
from oblivio import MemoryClient
from oblivio.memory import inputs
from oblivio.memory.commands import stored_data
from projections import events as ev
from projections.model import Scope
from projections.storage.graph_store import _node_values
from projections.storage.tables import memory_events, node_directory, nodes

HERE = Path(__file__).resolve().parent
TREE = HERE.parent

# The floor's process: this module's ``child`` under this tree's interpreter.
# A node's directory entry: its columns, taken from the node's row.
_ENTRY = ("stream_id", "node_id", "event_id", "ordinal")

_FLOOR_CHILD = f"""
import sys
sys.path.insert(0, {str(HERE)!r})
import store_floor
store_floor.child(sys.argv[1], int(sys.argv[2]))
"""


def text(n: int) -> str:
    """The memory ``store_ab.py``'s processes store (the same words on both sides)."""
    return f"Memory {n}: the person mentioned topic {n % 97} on day {n % 31} of the trip"


@dataclass
class _Head:
    """What the floor's process caches of one subject's stream."""

    ref: Any  # eventstore.model.StreamRef
    version: int
    chain_hash: bytes
    dek: bytes
    cipher: Any  # eventstore.codec.SubjectCipher


@dataclass
class _Insert:
    """One INSERT as the driver runs it: SQL, parameter names, bind processors."""

    sql: str
    processors: tuple[tuple[str, Callable[[Any], Any]], ...]


def _processors(table: Any, dialect: Any) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    return tuple(
        (column.name, process)
        for column in table.c
        if (process := column.type.bind_processor(dialect)) is not None
    )


class FloorStore:
    """The floor's store: the design's work, one write at a cached head."""

    def __init__(self, client: Any) -> None:
        self.ctx = client.context
        self.store = self.ctx.store
        self.codec = self.store.codec
        self.backend = self.store.backend
        self.stored_data = stored_data
        self.heads: dict[bytes, _Head] = {}
        self.postgres = self.backend.engine.dialect.name == "postgresql"
        self._statements: dict[Any, str] = {}
        self._sqlite_inserts: dict[tuple[str, tuple[str, ...]], _Insert] = {}
        self._driver: Any = None

    # -- the store ------------------------------------------------------------------

    def store_one(self, content: str, user_id: str) -> uuid.UUID:
        user, data = self.checked(content, user_id)
        key = self.codec.subject_key(self.ctx.namespace, user)
        encoded = self.encoded(data)
        while True:
            head = self.heads.get(key) or self._read_head(user)
            now = datetime.now(UTC)
            batch = self.sealed(head, encoded, now)
            source, node_rows = self._graph_rows(head, encoded.event_id, data, now)
            if self._write(batch, source, node_rows):
                head.version, head.chain_hash = batch.new_version, batch.chain_hash
                self.heads[key] = head
                return encoded.event_id
            self.heads.pop(key, None)  # the head moved: read it again and reseal

    def checked(self, content: str, user_id: str) -> tuple[str, dict[str, Any]]:
        """The input checks and effective time of ``store()``: the user and the payload."""
        user = inputs.user(user_id)
        data = self.stored_data(
            self.ctx,
            content,
            user=user,
            scope="personal",
            role="user",
            session_id=None,
            source_type="user_stated",
            node_type="fact",
            meta=None,
        )
        return user, data

    def encoded(self, data: dict[str, Any]) -> Any:
        """The event with a new id, its data as canonical JSON."""
        [encoded] = encode_batch(self.codec, [NewEvent(ev.STORED, data)], ANY)
        return encoded

    def sealed(self, head: _Head, encoded: Any, now: datetime) -> Any:
        """The event encrypted under the data key, digested and chained at ``head``."""
        at = (head.version, head.chain_hash)
        return seal_batch(self.codec, head.cipher.aead, head.ref, at, [encoded], now)

    def _graph_rows(
        self, head: _Head, event_id: uuid.UUID, data: dict[str, Any], now: datetime
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        event = _Event(event_id, now)
        scope, new_nodes = self.ctx.graph._stored_nodes(event, data)
        source = {
            "stream_id": head.ref.stream_id,
            "event_id": event_id,
            "scope": Scope(scope).value,
            "recorded_at": now,
        }
        rows = [_node_values(head.cipher, node, n) for n, node in enumerate(new_nodes)]
        return source, rows

    def _read_head(self, user: str) -> _Head:
        """The stream's head, its key unwrapped (once per subject, and after a miss)."""
        with self.store.transaction() as tx:
            locked = tx.lock_stream(Subject(self.ctx.namespace, user), create=True)
            dek = self.codec.unwrap(locked.wrapped_key)
        ref = locked.ref
        return _Head(ref, locked.version, locked.chain_hash, dek, SubjectCipher(dek, ref.stream_id))

    def _write(self, batch: Any, source: dict[str, Any], node_rows: list[dict[str, Any]]) -> bool:
        if self.postgres:
            return self._write_postgres(batch, source, node_rows)
        return self._write_sqlite(batch, source, node_rows)

    # -- PostgreSQL: one statement ------------------------------------------------------

    def _write_postgres(
        self, batch: Any, source: dict[str, Any], node_rows: list[dict[str, Any]]
    ) -> bool:
        dialect = self.backend.engine.dialect
        [event] = batch.events
        params: dict[str, Any] = {
            "stream_id": batch.stream.stream_id,
            "old_version": batch.old_version,
            "new_version": batch.new_version,
            "chain_hash": batch.chain_hash,
            "past_restriction": batch.past_restriction,
            "recorded_at": batch.recorded_at.astimezone(UTC).replace(tzinfo=None),
            "event_id": event.event_id,
            "type": event.type,
            "schema_version": event.schema_version,
            "payload": batch.ciphertexts[0],
            "digest": batch.digests[0],
        }
        params |= _prefixed("s_", memory_events, source, dialect)
        for n, row in enumerate(node_rows):
            params |= _prefixed(f"n{n}_", nodes, row, dialect)
            entry = {k: row[k] for k in _ENTRY}
            params |= _prefixed(f"d{n}_", node_directory, entry, dialect)
        shape = (tuple(source), tuple(tuple(row) for row in node_rows))
        sql = self._statements.get(shape)
        if sql is None:
            sql = self._statements[shape] = _postgres_statement(*shape)
        raw = self.backend._autocommit.raw_connection()
        try:
            driver = raw.driver_connection
            with driver.cursor() as cursor:
                cursor.execute(sql, params, prepare=True)
                return cursor.fetchone() is not None
        finally:
            raw.close()

    # -- SQLite: one transaction -------------------------------------------------------

    def _sqlite_insert(self, table: Any, rows: Sequence[Mapping[str, Any]]) -> None:
        """``rows`` (all with the same keys) into ``table``, the SQL built once per keys."""
        if not rows:
            return
        key = (table.name, tuple(rows[0]))
        insert = self._sqlite_inserts.get(key)
        if insert is None:
            verb = "INSERT OR IGNORE" if table.name == "memory_node_directory" else "INSERT"
            columns = list(rows[0])
            sql = f"{verb} INTO {table.name} ({', '.join(columns)}) VALUES ("
            sql += ", ".join(f":{c}" for c in columns) + ")"
            insert = _Insert(sql, _processors(table, sqlite.dialect()))
            self._sqlite_inserts[key] = insert
        values = [dict(row) for row in rows]
        for row in values:
            for name, process in insert.processors:
                if row.get(name) is not None:
                    row[name] = process(row[name])
        self._driver.executemany(insert.sql, values)

    def _write_sqlite(
        self, batch: Any, source: dict[str, Any], node_rows: list[dict[str, Any]]
    ) -> bool:
        [event_row] = event_rows(batch, commit_group=0)
        raw = self.backend.engine.raw_connection()
        try:
            driver = self._driver = raw.driver_connection
            driver.execute("BEGIN IMMEDIATE")
            try:
                moved = driver.execute(_SQLITE_MOVE_HEAD, head_params(batch)).rowcount
                if moved != 1:
                    driver.execute("ROLLBACK")
                    return False
                self._sqlite_insert(events, [event_row])
                self._sqlite_insert(memory_events, [source])
                self._sqlite_insert(nodes, node_rows)
                entries = [{k: r[k] for k in _ENTRY} for r in node_rows]
                self._sqlite_insert(node_directory, entries)
                driver.execute("COMMIT")
                return True
            except BaseException:
                driver.execute("ROLLBACK")
                raise
        finally:
            raw.close()


@dataclass
class _Event:
    """The two fields of an event the node graph's drafting reads."""

    event_id: uuid.UUID
    recorded_at: datetime


# The product's conditional head move on SQLite, as sqlite3 takes it.
_SQLITE_MOVE_HEAD = str(sqlite_backend._MOVE_HEAD)


def _prefixed(prefix: str, table: Any, row: Mapping[str, Any], dialect: Any) -> dict[str, Any]:
    """``row``'s values through their columns' bind processors, named ``prefix + column``."""
    out = {}
    for column in table.c:
        if column.name not in row:
            continue
        value = row[column.name]
        process = column.type.bind_processor(dialect)
        out[prefix + column.name] = value if process is None or value is None else process(value)
    return out


def _postgres_statement(source: tuple[str, ...], node_rows: tuple[tuple[str, ...], ...]) -> str:
    """The head's conditional move with the event, its source row and its nodes' rows
    (each a tuple of column names) as CTEs."""

    def cte(name: str, table: Any, prefix: str, columns: Sequence[str], tail: str = "") -> str:
        values = ", ".join(f"%({prefix}{c})s" for c in columns)
        return (
            f",\n{name} AS (INSERT INTO {table.name} ({', '.join(columns)})"
            f" SELECT {values} FROM head{tail})"
        )

    sql = """WITH head AS (
    UPDATE streams SET version = %(new_version)s, chain_hash = %(chain_hash)s
    WHERE stream_id = %(stream_id)s AND version = %(old_version)s
      AND closed_at IS NULL AND key_destroyed_at IS NULL
      AND (NOT restricted OR %(past_restriction)s)
    RETURNING stream_id
)"""
    sql += cte("src", memory_events, "s_", source)
    for n, columns in enumerate(node_rows):
        sql += cte(f"n{n}", nodes, f"n{n}_", columns)
        entry = _ENTRY
        sql += cte(f"d{n}", node_directory, f"d{n}_", entry, " ON CONFLICT DO NOTHING")
    sql += """
INSERT INTO events (commit_group, event_id, stream_id, version, type, schema_version,
                    recorded_at, payload, digest, chain_hash)
SELECT pg_current_xact_id()::text::bigint, %(event_id)s, head.stream_id, %(new_version)s,
       %(type)s, %(schema_version)s, %(recorded_at)s, %(payload)s, %(digest)s, %(chain_hash)s
FROM head
RETURNING position, commit_group"""
    return sql


# -- the processes ------------------------------------------------------------------------


def child(where: str, users: int) -> None:
    """The floor's process: a client for setup and checks, then floor stores per line read."""
    client = MemoryClient(where) if "://" not in where else MemoryClient(database_url=where)
    floor = FloorStore(client)
    done = 0

    def batch(size: int) -> None:
        nonlocal done
        for n in range(done, done + size):
            floor.store_one(text(n), f"user-{n % users}")
        done += size

    for n in range(users * 5):  # streams created by the product, as on the old side
        client.store(text(n), user_id=f"user-{n % users}")
    done = users * 5
    batch(users * 5)  # warm up: heads cached, statements prepared, keys unwrapped
    print("ready", flush=True)
    for line in sys.stdin:
        size = int(line)
        wall, cpu = time.perf_counter(), time.process_time()
        batch(size)
        print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu]), flush=True)
    _check(client, users, done)
    client.close()


def _check(client: Any, users: int, done: int) -> None:
    """What the floor wrote reads back through the product: every chain verifies, every
    memory's node is there (so the floor wrote what a store writes)."""
    report = client.context.store.verify(client.context.namespace)
    if not report.ok:
        raise SystemExit(f"floor: the log does not verify: {report}")
    hits = client.retrieve(text(done - 1), user_id=f"user-{(done - 1) % users}", limit=3)
    if not hits:
        raise SystemExit("floor: the last memory is not retrievable")


def parts(where: str, users: int, count: int) -> dict[str, float]:
    """Microseconds of this thread's CPU per floor store (``--parts``): the whole store,
    each part of the work in the process run ``count`` times on its own, and the write
    (parameters, pool, driver, the wait's system calls) as what the parts leave."""
    client = MemoryClient(where) if "://" not in where else MemoryClient(database_url=where)
    floor = FloorStore(client)
    for n in range(users * 5):
        client.store(text(n), user_id=f"user-{n % users}")
    for n in range(users * 5):  # warm up
        floor.store_one(text(n), f"user-{n % users}")
    started = time.thread_time()
    for n in range(count):
        floor.store_one(text(n), f"user-{n % users}")
    total = (time.thread_time() - started) / count * 1e6
    _check(client, users, count)
    user, data = floor.checked(text(0), "user-0")
    encoded = floor.encoded(data)
    head = floor.heads[floor.codec.subject_key(floor.ctx.namespace, user)]
    now = datetime.now(UTC)
    steps: dict[str, Callable[[int], Any]] = {
        "input checks and effective time (stored_data)": lambda n: floor.checked(text(n), user),
        "subject HMAC": lambda n: floor.codec.subject_key(floor.ctx.namespace, user),
        "event id and canonical JSON (encode_batch)": lambda n: floor.encoded(data),
        "AES-GCM, digest, chain (seal_batch)": lambda n: floor.sealed(head, encoded, now),
        "graph rows (extractor, nodes sealed)": lambda n: floor._graph_rows(
            head, encoded.event_id, data, now
        ),
    }
    costs = {}
    for part, step in steps.items():
        started = time.thread_time()
        for n in range(count):
            step(n)
        costs[part] = (time.thread_time() - started) / count * 1e6
    costs["the write (what the parts leave: parameters, pool, driver)"] = total - sum(
        costs.values()
    )
    costs["total"] = total
    # What the product's path adds on top, each alone: not in the floor's total.
    batch = floor.sealed(head, encoded, now)
    pool = floor.backend._autocommit if floor.postgres else floor.backend.engine
    layers: dict[str, Callable[[int], Any]] = {
        "beyond: a SQLAlchemy Connection checked out and returned": lambda n: (
            pool.connect().close()
        ),
        "beyond: the appended RecordedEvent (recorded_events)": lambda n: recorded_events(
            batch, [(0, 0)]
        ),
    }
    for part, step in layers.items():
        started = time.thread_time()
        for n in range(count):
            step(n)
        costs[part] = (time.thread_time() - started) / count * 1e6
    client.close()
    return costs


# The parts of the product's store() that --profile reports, by (file, function):
# each one's cumulative thread CPU time as a share of the whole store.
_PRODUCT_PARTS = {
    "the append at the remembered head (EventStore.append_each)": (
        "eventstore/store.py",
        "append_each",
    ),
    "  of which the connection (append_connection)": (
        "eventstore/backends/",
        "append_connection",
    ),
    "  of which the statement (Backend.append)": ("eventstore/backends/", "append"),
    "  of which the graph rows (stored_rows)": ("projections/graph.py", "stored_rows"),
    "the stream's lock, on a miss (lock_stream)": ("eventstore/transaction.py", "lock_stream"),
    "input checks (stored_data)": ("oblivio/memory/commands.py", "stored_data"),
    "canonical JSON (encode_batch)": ("eventstore/batch.py", "encode_batch"),
    "crypto and chain (seal_batch)": ("eventstore/batch.py", "seal_batch"),
    "the returned events (recorded_events)": ("eventstore/batch.py", "recorded_events"),
}


def profile_product(where: str, users: int, count: int) -> dict[str, float]:
    """This tree's ``store()`` under cProfile (thread CPU time): each part's share of a
    store, in percent (``--profile``)."""
    import cProfile
    import pstats

    client = MemoryClient(where) if "://" not in where else MemoryClient(database_url=where)
    for n in range(users * 10):
        client.store(text(n), user_id=f"user-{n % users}")
    profile = cProfile.Profile(time.thread_time)
    profile.enable()
    for n in range(count):
        client.store(text(n), user_id=f"user-{n % users}")
    profile.disable()
    client.close()
    stats: dict[Any, Any] = pstats.Stats(profile).stats  # type: ignore[attr-defined]

    def cumulative(path: str, function: str) -> float:
        return sum(
            row[3] for (file, _, name), row in stats.items() if path in file and name == function
        )

    whole = cumulative("oblivio/memory/commands.py", "store_memory")
    return {part: 100 * cumulative(*at) / whole for part, at in _PRODUCT_PARTS.items()}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    import store_ab

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="postgres")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--batch", type=int, default=200, help="memories per turn")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--database-url", default=store_ab.DEFAULT_SERVER_URL)
    parser.add_argument(
        "--parts",
        type=int,
        metavar="N",
        help="instead: N floor stores in this process, each part's CPU per store (OLD unused)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        metavar="N",
        help="instead: N stores of this tree's store() under cProfile, each part's share",
    )
    args = parser.parse_args(argv)
    if args.parts or args.profile:
        return _measure_parts(args, store_ab)
    trees = {"old": (args.old.resolve(), store_ab._CHILD), "floor": (TREE, _FLOOR_CHILD)}
    rates, cpu, ratios = store_ab.alternate(
        trees, args.backend, args.database_url, args.rounds, args.batch, args.users
    )
    return dict(store_ab.summary(args.backend, rates, cpu, ratios))


def _measure_parts(args: argparse.Namespace, store_ab: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        keyring = Path(scratch) / "keyring.json"
        os.environ["OBLIVIO_KEYRING"] = str(keyring)
        name = None
        if args.backend == "postgres":
            where, name = store_ab._scratch_database(args.database_url, TREE, keyring)
        else:
            where = str(Path(scratch) / "memory")
        try:
            if args.profile:
                costs = profile_product(where, args.users, args.profile)
            else:
                costs = parts(where, args.users, args.parts)
        finally:
            if name is not None:
                store_ab._drop_database(args.database_url, name)
    unit = "percent_of_store" if args.profile else "us_per_store"
    result = {"backend": args.backend, unit: costs, "load": os.getloadavg()[0]}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
