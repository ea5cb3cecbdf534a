"""Followers on Citus: every acknowledged event delivered once, writers on both workers.

    python benchmarks/citus_followers.py [--writers 4] [--events 5000] [--subjects 16]

Starts a coordinator and two workers from the installed Citus extension
(``oblivio_bench.citus``, fsync on), migrates a database there (the
distributed layout ``oblivio db upgrade`` makes), then runs ``--writers``
processes that append ``--events`` events in all, one per transaction, to
``--subjects`` subjects, while this process follows the whole log with
``EventStore.read_all``.  Afterwards the follower must have every acknowledged
event exactly once, in the order a fresh read of the log gives.  It prints the
counts (acknowledged, delivered, skipped, duplicated), how many subjects'
streams sit on each worker, the writers' time and the append rate.  The same
run first does all of it on a fresh database of one PostgreSQL server
(``--server-url``), and prints the cluster's append time over the single
node's.  Figures vary with the machine's load; the counts must not.
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from citus_load import streams_per_worker

from eventstore import EventStore, KeyringFile, NewEvent, create_backend
from eventstore.model import START
from oblivio.bootstrap import upgrade_schema
from oblivio_bench.citus import citus_cluster
from oblivio_bench.scratch import postgres_databases


def write(
    url: str, keyring: str, writer: int, count: int, subjects: int, acks: str, ready: Any
) -> None:
    store = EventStore(create_backend(url), KeyringFile(Path(keyring)))
    store.head("bench", "warm-up")  # connected, imports done
    ready.wait()  # the clock starts when every writer is here
    with open(acks, "w") as out:
        for n in range(count):
            subject = f"person-{(writer + n) % subjects}"
            [event] = store.append("bench", subject, [NewEvent("note", {"w": writer, "n": n})])
            out.write(f"{event.event_id}\n")
            out.flush()  # acknowledged: the append returned
    store.close()


def follow(url: str, args: argparse.Namespace, tmp: Path) -> dict[str, object]:
    """Writers and a follower on the migrated database at ``url``; the figures."""
    per_writer = args.events // args.writers
    backend = create_backend(url)
    upgrade_schema(backend.engine)
    keyring = str(tmp / "keyring.json")
    store = EventStore(backend, KeyringFile(Path(keyring)))
    [warm_up] = store.append("bench", "warm-up", [NewEvent("note", {})])  # keyring made
    ctx = multiprocessing.get_context("spawn")
    acks = [str(tmp / f"acks-{w}") for w in range(args.writers)]
    ready = ctx.Barrier(args.writers + 1)
    procs = [
        ctx.Process(target=write, args=(url, keyring, w, per_writer, args.subjects, acks[w], ready))
        for w in range(args.writers)
    ]
    delivered: list[uuid.UUID] = []
    seen: set[uuid.UUID] = set()
    cursor, duplicated = START, 0

    def poll() -> int:
        nonlocal cursor, duplicated
        page = store.read_all(cursor, limit=500)
        for event in page.events:
            duplicated += event.event_id in seen
            seen.add(event.event_id)
            delivered.append(event.event_id)
        cursor = page.next_cursor
        return len(page.events)

    for p in procs:
        p.start()
    ready.wait()
    started = time.monotonic()
    while any(p.is_alive() for p in procs):
        if not poll():
            time.sleep(0.05)
    writing = time.monotonic() - started
    while_writing = len(delivered)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    acked = {uuid.UUID(line) for a in acks for line in Path(a).read_text().split()}
    acked.add(warm_up.event_id)
    deadline = time.monotonic() + 60
    while not acked <= seen and time.monotonic() < deadline:
        if not poll():
            time.sleep(0.05)
    poll()
    fresh = [e.event_id for e in store.read_all(limit=len(delivered) + 10).events]
    store.close()
    return {
        "acknowledged": len(acked),
        "delivered": len(seen),
        "while_writing": while_writing,
        "skipped": len(acked - seen),
        "duplicated": duplicated,
        "unacknowledged": len(seen - acked),
        "same_order": fresh == delivered,
        "seconds": writing,
        "rate": len(acked) / writing,
    }


def show(name: str, f: dict[str, object]) -> None:
    print(
        f"{name}: acknowledged {f['acknowledged']}, delivered {f['delivered']} "
        f"({f['while_writing']} while writing), skipped {f['skipped']}, "
        f"duplicated {f['duplicated']}, unacknowledged delivered {f['unacknowledged']}, "
        f"order equals a fresh read: {f['same_order']}; "
        f"writing {f['seconds']:.1f}s, {f['rate']:.0f} appends/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--subjects", type=int, default=16)
    parser.add_argument(
        "--server-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="a single PostgreSQL server for the same run beside the cluster ('' to skip)",
    )
    args = parser.parse_args()
    print(f"{args.events} events, {args.writers} writers, {args.subjects} subjects")
    single = None
    if args.server_url:
        with (
            tempfile.TemporaryDirectory() as tmp,
            postgres_databases(args.server_url, ["followers"]) as urls,
        ):
            single = follow(urls["followers"], args, Path(tmp))
        show("single node", single)
    with tempfile.TemporaryDirectory() as tmp, citus_cluster(workers=2) as cluster:
        url = cluster.create_database("followers")
        cluster_figures = follow(url, args, Path(tmp))
        held = streams_per_worker(url)
    show("citus (coordinator + 2 workers)", cluster_figures)
    print(f"streams per worker port: {held}")
    if single is not None:
        ratio = float(single["rate"]) / float(cluster_figures["rate"])  # type: ignore[arg-type]
        print(f"append time, cluster over single node: {ratio:.2f}x")


if __name__ == "__main__":
    main()
