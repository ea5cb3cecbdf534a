"""What a single-shard append would gain on Citus: the append's two transaction shapes.

    python benchmarks/citus_append_shapes.py [--appends 300] [--rounds 5] [--streams 32]

oblivio's append is two statements in one transaction: the stream row locked
(``FOR UPDATE``, with its data key) and the head moved with the events
inserted (``eventstore.backends.postgres``'s one-statement append, sent as
it is here).  This script sends exactly those statements, with psycopg, on
three layouts of the log's ``streams``, ``data_keys`` and ``events`` tables:

- ``two-phase``: today's Citus layout: ``streams`` and ``data_keys`` on the
  coordinator (Citus local tables), ``events`` distributed by ``stream_id``;
  the append writes the coordinator and one worker, so Citus commits it with
  two-phase commit;
- ``one-shard``: all three distributed by ``stream_id`` and co-located, so
  the append touches one shard and Citus commits it with one-phase commit
  (sent as the head's UPDATE and a multi-row ``VALUES`` insert, pipelined:
  see ``_HEAD`` for why not the one-statement form);
- ``single``: the same tables on one PostgreSQL server (``--server-url``).

Rounds alternate the three (A B C A B C …); each round appends ``--appends``
single events to ``--streams`` streams, one per transaction, and the report
gives the median milliseconds per append and each Citus shape over the
single server.  It also counts the two-phase commits Citus recorded
(``pg_dist_transaction``, with its recovery paused) and checks that the
commit group an append records is the coordinator's transaction id in both
Citus shapes (what the global order rests on).

The cluster is started from the installed extension (``oblivio_bench.citus``,
fsync on, like the server's default); the server's database is a scratch one,
dropped at the end.  Not timed: how the one-shard layout would find a
subject's current stream without a query on every shard (a directory on the
coordinator, read but not written by an append, is one design; see
docs/scaling.md).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import sqlalchemy as sa

from eventstore.backends import citus as citus_layout
from eventstore.backends.postgres import _append_sql, normalise_postgres_url
from eventstore.schema import data_keys, events, metadata, streams
from oblivio_bench.citus import citus_cluster
from oblivio_bench.eventstore import append_parameters
from oblivio_bench.scratch import postgres_databases

# The log's append statement for a batch of events (arrays), with no derived rows.
_APPEND = _append_sql(False, ())

_LOCK = (
    "SELECT s.stream_id, s.version, s.chain_hash, k.wrapped_key FROM streams s"
    " LEFT JOIN data_keys k ON k.stream_id = s.stream_id"
    " WHERE s.stream_id = %(stream_id)s FOR UPDATE OF s"
)
_TABLES = [streams, data_keys, events]

# The one-shard shape's append.  Citus plans ``INSERT … SELECT FROM unnest(…)``
# (the single server's form) by pulling the rows to the coordinator and copying
# them into the shard over a connection of its own, and a transaction with two
# connections to a worker commits with two-phase commit; so does the one-statement
# append's data-modifying CTE.  A multi-row ``VALUES`` insert of one stream's rows
# is routed to its shard as one task, on the connection that moved the head; the
# head's UPDATE and the insert go in one round trip (psycopg's pipeline).
_HEAD = """UPDATE streams SET version = %(new_version)s, chain_hash = %(chain_hash)s
 WHERE stream_id = %(stream_id)s AND version = %(old_version)s
   AND closed_at IS NULL AND key_destroyed_at IS NULL"""


def _rows(count: int) -> str:
    row = (
        "(pg_current_xact_id()::text::bigint, %(event_id{i})s, %(stream_id)s, %(version{i})s,"
        " 'memory.stored', 1, %(recorded_at)s, %(payload{i})s, %(digest{i})s, %(chain{i})s)"
    )
    return (
        "INSERT INTO events (commit_group, event_id, stream_id, version, type, schema_version,"
        " recorded_at, payload, digest, chain_hash) VALUES "
        + ", ".join(row.format(i=i) for i in range(count))
        + " RETURNING position, commit_group, version"
    )


def create_tables(url: str, layout: str) -> None:
    """The log's three tables as oblivio's schema defines them, placed per ``layout``."""
    engine = sa.create_engine(normalise_postgres_url(url))
    try:
        with engine.begin() as conn:
            metadata.create_all(conn, tables=_TABLES)
            if layout == "single":
                return
            conn.execute(sa.text("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'"))
            citus_layout._key_by_stream(conn, "events")
            conn.execute(sa.text("SELECT create_distributed_table('events', 'stream_id')"))
            if layout == "two-phase":
                conn.execute(
                    sa.text(
                        "SELECT citus_add_local_table_to_metadata('streams',"
                        " cascade_via_foreign_keys => true)"
                    )
                )
                return
            # one-shard: the (namespace, subject_key, generation) key can no longer
            # be enforced across shards; a coordinator directory would carry it.
            for table in ("streams", "data_keys"):
                citus_layout._key_by_stream(conn, table)
                conn.execute(
                    sa.text(
                        f"SELECT create_distributed_table('{table}', 'stream_id',"
                        " colocate_with => 'events')"
                    )
                )
    finally:
        engine.dispose()


def seed(conn: psycopg.Connection[Any], count: int) -> list[int]:
    """``count`` open streams, each with a data key; their ids."""
    now = datetime.now(UTC).replace(tzinfo=None)
    ids = []
    for _ in range(count):
        row = conn.execute(
            "INSERT INTO streams (namespace, subject_key, generation, version, chain_hash,"
            " created_at) VALUES ('bench', %s, 1, 0, %s, %s) RETURNING stream_id",
            (os.urandom(32), bytes(32), now),
        ).fetchone()
        assert row is not None
        conn.execute(
            "INSERT INTO data_keys (dek_id, stream_id, kek_version, wrapped_key, created_at)"
            " VALUES (%s, %s, 1, %s, %s)",
            (uuid.uuid4(), row[0], os.urandom(60), now),
        )
        ids.append(row[0])
    conn.commit()
    return ids


class Appender:
    """One connection appending one event per transaction, as oblivio's append does."""

    def __init__(self, url: str, stream_ids: list[int], *, split: bool) -> None:
        self.conn = psycopg.connect(url)
        self.split = split
        self.stream_ids = stream_ids
        self.versions = dict.fromkeys(stream_ids, 0)
        self.n = 0

    def append(self, *, check_xid: bool = False) -> bool:
        """One append; with ``check_xid``, whether the commit group it recorded is the
        transaction's xid on the coordinator (a statement more, so not when timed)."""
        stream_id = self.stream_ids[self.n % len(self.stream_ids)]
        self.n += 1
        old = self.versions[stream_id]
        same = True
        with self.conn.transaction(), self.conn.cursor(binary=True) as cur:
            cur.execute(_LOCK, {"stream_id": stream_id})
            rows = self._append(cur, _params(stream_id, old))
            assert len(rows) == 1, rows
            if check_xid:
                xid = cur.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
                same = xid is not None and xid[0] == rows[0][1]
        self.versions[stream_id] = old + 1
        return same

    def _append(self, cur: psycopg.Cursor[Any], params: dict[str, Any]) -> list[Any]:
        if not self.split:
            return cur.execute(_APPEND, append_parameters(params)).fetchall()
        one = {
            "event_id0": params["event_ids"][0],
            "version0": params["versions"][0],
            "payload0": params["payloads"][0],
            "digest0": params["digests"][0],
            "chain0": params["chain_hashes"][0],
        }
        with self.conn.pipeline():
            cur.execute(_HEAD, params)
            rows = self.conn.cursor(binary=True)
            rows.execute(_rows(1), params | one)
        assert cur.rowcount == 1  # the head moved (the writer holds its lock)
        return rows.fetchall()

    def close(self) -> None:
        self.conn.close()


def _params(stream_id: int, old: int) -> dict[str, Any]:
    return {
        "stream_id": stream_id,
        "old_version": old,
        "past_restriction": False,
        "new_version": old + 1,
        "chain_hash": os.urandom(32),
        "recorded_at": datetime.now(UTC).replace(tzinfo=None),
        "event_ids": [uuid.uuid4()],
        "versions": [old + 1],
        "types": ["memory.stored"],
        "schema_versions": [1],
        "payloads": [os.urandom(220)],
        "digests": [os.urandom(32)],
        "chain_hashes": [os.urandom(32)],
    }


def two_phase_commits(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_dist_transaction").fetchone()
        assert row is not None
        return int(row[0])


def timed_round(appender: Appender, appends: int) -> float:
    """Milliseconds per append over ``appends`` appends."""
    started = time.perf_counter()
    for _ in range(appends):
        appender.append()
    return (time.perf_counter() - started) * 1000 / appends


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=300, help="appends per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with (
        citus_cluster(workers=2) as cluster,
        postgres_databases(args.server_url, ["shapes"]) as server,
    ):
        urls = {
            "two-phase": cluster.create_database("shape_two_phase"),
            "one-shard": cluster.create_database("shape_one_shard"),
            "single": server["shapes"],
        }
        # Keep the record of every two-phase commit: recovery would delete it.
        cluster.execute(
            cluster.coordinator, "postgres",
            "ALTER SYSTEM SET citus.recover_2pc_interval = -1", "SELECT pg_reload_conf()",
        )  # fmt: skip
        appenders: dict[str, Appender] = {}
        own_xid: dict[str, bool] = {}
        for name, url in urls.items():
            create_tables(url, name)
            with psycopg.connect(url) as conn:
                appenders[name] = Appender(url, seed(conn, args.streams), split=name == "one-shard")
            # Untimed: the workers' connections opened, the commit groups checked.
            own_xid[name] = all(appenders[name].append(check_xid=True) for _ in range(20))
        before = {n: two_phase_commits(urls[n]) for n in ("two-phase", "one-shard")}
        ms: dict[str, list[float]] = {name: [] for name in urls}
        for round_no in range(1, args.rounds + 1):
            for name, appender in appenders.items():
                ms[name].append(timed_round(appender, args.appends))
                print(f"round {round_no}: {name:<9} {ms[name][-1]:.3f} ms/append", flush=True)
        after = {n: two_phase_commits(urls[n]) for n in before}
        for appender in appenders.values():
            appender.close()
    report(ms, own_xid, {n: after[n] - before[n] for n in before}, args)


def report(
    ms: dict[str, list[float]],
    own_xid: dict[str, bool],
    prepared: dict[str, int],
    args: argparse.Namespace,
) -> None:
    appends = args.rounds * args.appends
    single: Callable[[int], float] = lambda i: ms["single"][i]  # noqa: E731
    print(f"\n{appends} appends per shape, {args.streams} streams, one event per transaction")
    for name, values in ms.items():
        line = f"{name:<9} median {statistics.median(values):.3f} ms/append"
        if name == "one-shard":
            over = statistics.median(v / ms["two-phase"][i] for i, v in enumerate(values))
            line += f", {over:.2f}x the two-phase append"
        if name != "single":
            ratio = statistics.median(v / single(i) for i, v in enumerate(values))
            line += (
                f", {ratio:.2f}x the single server (paired rounds); two-phase commits "
                f"{prepared[name]} of {appends}; commit group = the coordinator's xid: "
                f"{own_xid[name]}"
            )
        print(line)


if __name__ == "__main__":
    main()
