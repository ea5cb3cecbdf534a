"""Each single-subject operation on the cluster against its floor, in one run.

    python benchmarks/citus_floors.py [--rounds 5] [--ops 100] [--subjects 16] [--batch-shapes]

The issue's target for the cluster is a cost of at most 1.5x the single server
for the operations of one subject.  On one machine, where the coordinator, the
workers and the client share the cores, what an operation's statements alone
cost on the cluster against the server bounds what oblivio can reach: that is
the operation's *floor*.  This script measures, for each operation, oblivio
itself and its floor, on the cluster and on the single server, in the same
minutes (rounds alternate: every operation, oblivio then the floor, each on
the cluster then the server), and prints milliseconds per operation and the
cluster's cost over the server's (median of the rounds' paired ratios):

- ``append``: ``EventStore.append`` of one event (a transaction: the stream row
  locked with its key, the append, the commit);
- ``batch``: the same with 100 events;
- ``store``: ``MemoryClient.store`` at the head the process remembers (the
  append with the node graph's rows, committed on its own).

The floor of each is the statements oblivio's backend sends for it, built by the
backend's own functions from an append oblivio made (its sealed batch and
derived rows, taken once before the rounds, then renewed per operation: fresh
event and node ids, the next version of a stream of the floor's own) and sent
with psycopg over one connection with the same waits: the lock with its BEGIN,
then the append (on the cluster the head's ``UPDATE``, the events' ``INSERT``
and the graph rows' ``INSERT`` s in one pipeline; on the server one statement),
then the COMMIT; a store at the remembered head has no lock, and on the server
its one statement commits on its own.  Nothing of oblivio runs around them: no
encryption, hashing, pool or SQLAlchemy.

Every database is migrated with ``oblivio db upgrade`` (``oblivio_bench.loading``:
on the cluster the distributed layout, 32 shards over two workers, fsync on); the
floor writes to a database of its own, so that its events (copies of oblivio's
ciphertexts under other ids) never meet oblivio's readers.  The script also
counts the two-phase commits each cluster database recorded during the rounds
(``pg_dist_transaction``, its recovery paused): a one-shard operation records none.

``--batch-shapes`` then times the floor's batch on the cluster in three shapes, rounds
alternating: the backend's (the head's UPDATE and one multi-row ``VALUES`` insert),
one single-row INSERT per event in the same pipeline, and the events as arrays
inserted FROM unnest (the single server's form), with the two-phase commits of each.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import statistics
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import psycopg
from sqlalchemy.dialects.postgresql import psycopg as psycopg_dialect

from eventstore import EventStore
from eventstore.backends import citus as citus_backend
from eventstore.backends import postgres as postgres_backend
from eventstore.batch import DerivedRows, SealedBatch
from eventstore.model import StreamRef
from eventstore.transaction import _BY_ID_LOCKED
from oblivio.bootstrap import open_event_store
from oblivio.client import MemoryClient
from oblivio.settings import Settings
from oblivio_bench.config import CITUS, DEFAULT_SERVER_URL
from oblivio_bench.loading import memory_texts, scratch_settings, stored_event

OPS = ("append", "batch", "store")
BATCH = 100
PLACES = ("cluster", "server")
_DIALECT = psycopg_dialect.dialect()  # type: ignore[no-untyped-call]
_LOCK = str(_BY_ID_LOCKED.compile(dialect=_DIALECT))


# -- what oblivio sends, taken from one of its appends ---------------------------------


@dataclass
class Taken:
    """The sealed batch and derived rows of oblivio's last append on a backend."""

    batch: SealedBatch | None = None
    derived: Sequence[DerivedRows] = ()


@contextmanager
def taking(store: EventStore) -> Iterator[Taken]:
    """Record what ``store``'s backend is asked to append during the block."""
    backend = store.backend
    taken = Taken()
    append = backend.append

    def recording(conn: Any, batch: SealedBatch, derived: Sequence[DerivedRows], **kw: Any) -> Any:
        taken.batch, taken.derived = batch, list(derived)
        return append(conn, batch, derived, **kw)

    backend.append = recording  # type: ignore[method-assign]
    try:
        yield taken
    finally:
        del backend.append


def renewed(taken: Taken, stream: StreamRef, version: int) -> tuple[SealedBatch, list[DerivedRows]]:
    """``taken``'s append as the next one of ``stream`` (at ``version``): every id fresh
    (one new id per old one, so the rows still name each other), the same bytes."""
    assert taken.batch is not None
    ids: dict[uuid.UUID, uuid.UUID] = {}

    def fresh(value: Any) -> Any:
        if isinstance(value, uuid.UUID):
            return ids.setdefault(value, uuid.uuid4())
        return value

    batch = taken.batch._replace(
        stream=stream,
        old_version=version,
        recorded_at=datetime.now(UTC),
        events=[e._replace(event_id=fresh(e.event_id)) for e in taken.batch.events],
    )
    derived = [
        part._replace(
            rows=[
                {k: stream.stream_id if k == "stream_id" else fresh(v) for k, v in row.items()}
                for row in part.rows
            ]
        )
        for part in taken.derived
    ]
    return batch, derived


# -- the floor: the backend's statements, sent with psycopg ----------------------------

Statement = tuple[str | bytes, Any]


def cluster_statements(batch: SealedBatch, derived: Sequence[DerivedRows]) -> list[Statement]:
    """What ``CitusBackend.append`` sends in its pipeline: the head's UPDATE, the events'
    INSERT and each derived part's INSERT (one ``executemany``: a list of rows)."""
    statements: list[Statement] = list(citus_backend._append_statements(batch))
    for part in derived:
        insert = citus_backend._derived_insert(part.table, part.unless_present)
        sql, processors = postgres_backend._insert_of(insert, part.rows[0], _DIALECT)
        rows = [dict(row) for row in part.rows]
        for row in rows:
            for name, process in processors:
                row[name] = process(row[name])
        statements.append((sql, rows))
    return statements


def server_statements(batch: SealedBatch, derived: Sequence[DerivedRows]) -> list[Statement]:
    """What ``PostgresBackend.append`` sends: one statement."""
    return [postgres_backend._append_statement(batch, derived, _DIALECT)]


@dataclass
class FloorOp:
    """One planned operation of the floor: the stream to lock (``None``: a store at the
    remembered head, which takes no lock) and the append's statements."""

    lock: int | None
    statements: list[Statement]


class Floor:
    """The floor's connection to one database, and its streams' heads.

    In autocommit mode, with BEGIN and COMMIT sent as statements: psycopg's own
    BEGIN would wait for its answer before the statements it precedes."""

    def __init__(self, url: str, place: str, streams: list[StreamRef]) -> None:
        self.place = place
        self.conn = psycopg.connect(url, autocommit=True)
        self.streams = streams
        self.versions = {s.stream_id: _version(self.conn, s.stream_id) for s in streams}
        self.n = 0

    def plan(self, taken: Taken, count: int, *, locked: bool) -> list[FloorOp]:
        """``count`` operations like ``taken``'s, round-robin over the floor's streams."""
        build = cluster_statements if self.place == "cluster" else server_statements
        ops = []
        for _ in range(count):
            stream = self.streams[self.n % len(self.streams)]
            self.n += 1
            batch, derived = renewed(taken, stream, self.versions[stream.stream_id])
            self.versions[stream.stream_id] = batch.new_version
            ops.append(FloorOp(stream.stream_id if locked else None, build(batch, derived)))
        return ops

    def run(self, op: FloorOp) -> None:
        """One operation: [BEGIN, the lock], [the append], COMMIT, a wait each; a store
        at the remembered head sends its BEGIN with the append, and on the server it is
        the one autocommitted statement."""
        conn = self.conn
        if op.lock is None and self.place == "server":
            self._append(op.statements)
            return
        if op.lock is None:
            self._append([(b"BEGIN", None), *op.statements])
        else:
            with conn.cursor(binary=True) as cur:
                with conn.pipeline():
                    conn.execute(b"BEGIN")
                    cur.execute(_LOCK, {"stream_id": op.lock})
                assert cur.fetchone() is not None
            self._append(op.statements)
        conn.execute(b"COMMIT")

    def _append(self, statements: list[Statement]) -> None:
        """The statements in one pipeline: the head must have moved."""
        cursors = []
        with self.conn.pipeline():
            for sql, params in statements:
                cur = self.conn.cursor(binary=True)
                if isinstance(params, list) and params and isinstance(params[0], dict):
                    cur.executemany(sql, params)
                else:
                    cur.execute(sql, params)
                cursors.append(cur)
        first = cursors[1] if statements[0][0] == b"BEGIN" else cursors[0]
        # The head's UPDATE on the cluster, the append's one statement on the server.
        moved = first.rowcount == 1 if self.place == "cluster" else first.fetchall()
        assert moved, "the head did not move"
        for cur in cursors:
            cur.close()

    def close(self) -> None:
        self.conn.close()


def _version(conn: psycopg.Connection[Any], stream_id: int) -> int:
    row = conn.execute("SELECT version FROM streams WHERE stream_id = %s", (stream_id,)).fetchone()
    assert row is not None
    return int(row[0])


# -- the batch's other shapes on the cluster ---------------------------------------------

# The batch's events as arrays, inserted FROM unnest: the single server's form.
_UNNEST = """INSERT INTO events (commit_group, event_id, stream_id, version, type, schema_version,
                    recorded_at, payload, digest, chain_hash)
SELECT pg_current_xact_id()::text::bigint, e.event_id, %(stream_id)s, e.version, e.type,
       e.schema_version, %(recorded_at)s, e.payload, e.digest, e.chain_hash
FROM unnest(%(event_id)s::uuid[], %(version)s::bigint[], %(type)s::text[],
            %(schema_version)s::int[], %(payload)s::bytea[], %(digest)s::bytea[],
            %(chain_hash)s::bytea[])
     AS e(event_id, version, type, schema_version, payload, digest, chain_hash)
RETURNING position, commit_group, version"""
_ROW_COLUMNS = ("event_id", "version", "type", "schema_version", "payload", "digest", "chain_hash")
BATCH_SHAPES = ("values", "rows", "unnest")


def batch_shape(shape: str, statements: list[Statement]) -> list[Statement]:
    """The cluster's batch append (the head's UPDATE and one multi-row ``VALUES`` insert:
    ``values``) with its events sent otherwise: one INSERT per event in the same
    pipeline (``rows``), or arrays inserted FROM unnest (``unnest``)."""
    head, (_, values) = statements
    if shape == "values":
        return statements
    count = sum(1 for name in values if name.startswith("event_id"))
    shared = {"stream_id": values["stream_id"], "recorded_at": values["recorded_at"]}
    if shape == "rows":
        rows = [shared | {f"{c}0": values[f"{c}{i}"] for c in _ROW_COLUMNS} for i in range(count)]
        return [head, (citus_backend._insert_events(1), rows)]
    arrays = {c: [values[f"{c}{i}"] for i in range(count)] for c in _ROW_COLUMNS}
    return [head, (_UNNEST, shared | arrays)]


def measure_batch_shapes(
    floor: Floor, taken: Taken, url: str, rounds: int, batches: int
) -> dict[str, tuple[list[float], int]]:
    """ms per batch of each shape on the cluster, rounds alternating, and the two-phase
    commits each recorded in all."""
    ms: dict[str, list[float]] = {shape: [] for shape in BATCH_SHAPES}
    prepared = dict.fromkeys(BATCH_SHAPES, 0)
    for round_no in range(1, rounds + 1):
        for shape in BATCH_SHAPES:
            ops = floor.plan(taken, batches, locked=True)
            for op in ops:
                op.statements = batch_shape(shape, op.statements)
            before = two_phase_commits(url)
            ms[shape].append(timed([functools.partial(floor.run, op) for op in ops]))
            prepared[shape] += two_phase_commits(url) - before
            print(
                f"round {round_no}: batch shape {shape:<6} {ms[shape][-1]:8.3f} ms/op", flush=True
            )
    return {shape: (ms[shape], prepared[shape]) for shape in BATCH_SHAPES}


# -- oblivio itself ---------------------------------------------------------------------


@dataclass
class Product:
    """oblivio on one database: a client, and each operation's subjects (a store's head is
    remembered only while nothing else appends to its subject)."""

    client: MemoryClient
    subjects: int
    rng: random.Random = field(default_factory=lambda: random.Random(1729))
    n: dict[str, int] = field(default_factory=dict)

    def users(self, op: str) -> list[str]:
        return [f"{op}-{i}" for i in range(self.subjects)]

    def plan(self, op: str, count: int) -> list[Callable[[], object]]:
        """``count`` calls of ``op``, round-robin over its subjects, their events built
        before the clock starts."""
        log, namespace = self.client.context.store, self.client.context.namespace
        users = self.users(op)
        calls: list[Callable[[], object]] = []
        for _ in range(count):
            n = self.n[op] = self.n.get(op, -1) + 1
            user = users[n % len(users)]
            if op == "store":
                [text] = memory_texts(self.rng, 1)
                calls.append(functools.partial(self.client.store, text, user_id=user))
                continue
            size = BATCH if op == "batch" else 1
            events = [stored_event(user, t) for t in memory_texts(self.rng, size)]
            calls.append(functools.partial(log.append, namespace, user, events))
        return calls


# -- the run ----------------------------------------------------------------------------


@dataclass
class Place:
    name: str
    product: Product
    floor: Floor
    taken: dict[str, Taken]


def prepare(name: str, settings: dict[str, Settings], subjects: int) -> Place:
    """Each operation's subjects created on both databases of a place, and oblivio's
    append of each operation taken (none of it timed)."""
    product = Product(MemoryClient(settings=settings["product"]), subjects)
    taken: dict[str, Taken] = {}
    for op in OPS:
        for call in product.plan(op, subjects):  # streams created, store heads remembered
            call()
        for call in product.plan(op, 1):
            with taking(product.client.context.store) as taken[op]:
                call()
    namespace = product.client.context.namespace
    seeding = open_event_store(settings["floor"])
    try:
        for i in range(subjects):
            seeding.append(namespace, f"floor-{i}", [stored_event(f"floor-{i}", "seed")])
        streams = [seeding.read_stream(namespace, f"floor-{i}")[0].stream for i in range(subjects)]
    finally:
        seeding.close()
    floor = Floor(settings["floor"].database_url or "", name, streams)
    return Place(name, product, floor, taken)


def timed(calls: Sequence[Callable[[], object]]) -> float:
    """Milliseconds per call."""
    started = time.perf_counter()
    for call in calls:
        call()
    return (time.perf_counter() - started) * 1000 / len(calls)


def count_for(op: str, ops: int) -> int:
    return max(1, ops // 10) if op == "batch" else ops


def measure(places: list[Place], rounds: int, ops: int) -> dict[tuple[str, str, str], list[float]]:
    """ms per operation by (operation, "oblivio" or "floor", place), one entry a round."""
    ms: dict[tuple[str, str, str], list[float]] = {}
    for round_no in range(1, rounds + 1):
        for op in OPS:
            count = count_for(op, ops)
            for kind in ("oblivio", "floor"):
                for place in places:
                    if kind == "oblivio":
                        calls = place.product.plan(op, count)
                    else:
                        planned = place.floor.plan(place.taken[op], count, locked=op != "store")
                        calls = [functools.partial(place.floor.run, o) for o in planned]
                    value = timed(calls)
                    ms.setdefault((op, kind, place.name), []).append(value)
                    print(
                        f"round {round_no}: {op:<6} {kind:<7} {place.name:<7} {value:8.3f} ms/op",
                        flush=True,
                    )
    return ms


def two_phase_commits(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_dist_transaction").fetchone()
        assert row is not None
        return int(row[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--ops", type=int, default=100, help="operations per round (batch: a tenth)"
    )
    parser.add_argument("--subjects", type=int, default=16)
    parser.add_argument("--server-url", default=DEFAULT_SERVER_URL)
    parser.add_argument(
        "--batch-shapes",
        action="store_true",
        help="then time the cluster's batch sent in other shapes (the floor's statements)",
    )
    args = parser.parse_args()
    labels = ["product", "floor"]
    with ExitStack() as stack:
        cluster = stack.enter_context(scratch_settings(CITUS, args.server_url, labels))
        server = stack.enter_context(scratch_settings("postgres", args.server_url, labels))
        urls = {label: cluster[label].database_url or "" for label in labels}
        # Keep every two-phase commit's record (recovery would delete it): on the
        # coordinator, for all its databases.
        with psycopg.connect(urls["floor"], autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET citus.recover_2pc_interval = -1")
            conn.execute("SELECT pg_reload_conf()")
        places = [
            prepare("cluster", cluster, args.subjects),
            prepare("server", server, args.subjects),
        ]
        before = {label: two_phase_commits(url) for label, url in urls.items()}
        load = os.getloadavg()[0]
        ms = measure(places, args.rounds, args.ops)
        load_end = os.getloadavg()[0]
        prepared = {label: two_phase_commits(url) - before[label] for label, url in urls.items()}
        shapes = {}
        if args.batch_shapes:
            floor, taken = places[0].floor, places[0].taken["batch"]
            batches = count_for("batch", args.ops)
            shapes = measure_batch_shapes(floor, taken, urls["floor"], args.rounds, batches)
        for place in places:
            place.floor.close()
            place.product.client.close()
    report(ms, args, (load, load_end), prepared)
    for shape, (values, records) in shapes.items():
        print(
            f"cluster batch as {shape:<6} median {statistics.median(values):8.3f} ms;"
            f" two-phase commits {records} of {len(values) * count_for('batch', args.ops)}"
        )


def report(
    ms: dict[tuple[str, str, str], list[float]],
    args: argparse.Namespace,
    load: tuple[float, float],
    prepared: dict[str, int],
) -> None:
    print(
        f"\n{args.rounds} rounds of {args.ops} operations (batches: {count_for('batch', args.ops)}"
        f" of {BATCH} events) over {args.subjects} subjects; load average {load[0]:.1f} ->"
        f" {load[1]:.1f}; two-phase commits during the rounds: oblivio {prepared['product']},"
        f" floor {prepared['floor']}"
    )
    print(
        f"{'operation':<9} {'':<8} {'cluster ms':>10} {'server ms':>10} {'cost':>6}"
        f"   oblivio over its floor: {'cluster':>7} {'server':>7}"
    )
    for op in OPS:
        for kind in ("oblivio", "floor"):
            cluster, server = ms[(op, kind, "cluster")], ms[(op, kind, "server")]
            line = (
                f"{op:<9} {kind:<8} {statistics.median(cluster):10.3f}"
                f" {statistics.median(server):10.3f} {paired(cluster, server):5.2f}x"
            )
            if kind == "oblivio":
                over = [paired(ms[(op, "oblivio", p)], ms[(op, "floor", p)]) for p in PLACES]
                line += f"{'':>27}{over[0]:6.2f}x {over[1]:6.2f}x"
            print(line)


def paired(values: Sequence[float], baseline: Sequence[float]) -> float:
    """The median of the rounds' ratios."""
    return statistics.median(v / b for v, b in zip(values, baseline, strict=True))


if __name__ == "__main__":
    main()
