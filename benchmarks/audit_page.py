"""How long the console's audit page takes with 100,000 audit entries.

    python benchmarks/audit_page.py [--backend sqlite|postgres] [--entries 100000]
        [--matching 10] [--rounds 20] [--database-url URL]

Writes ``--entries`` content-free audit entries (``--matching`` of them about
one subject, spread through the stream, the rest about other subjects) into a
fresh store, signs an auditor in, then times ``GET /console/audit`` (the first
page, newest first) and ``GET /console/audit?subject=<ref>`` (the page of the
one subject) through the real app, each ``--rounds`` times after one warm-up
request (the first request also indexes nothing: entries are indexed as they
are written).  It prints the median and the slowest round of each, in
milliseconds; the issue's target is under 200 ms for both.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi.testclient import TestClient

from eventstore import AuditEntry, create_backend
from oblivio.bootstrap import open_memory, upgrade_schema
from oblivio.http import create_app
from oblivio.memory import api_keys
from oblivio.memory.context import MemoryContext
from oblivio.settings import Settings
from oblivio_bench.eventstore import DEFAULT_SERVER_URL
from oblivio_bench.report import load_average
from oblivio_bench.scratch import postgres_databases

BATCH = 5_000  # entries per transaction while filling the stream
NONCE = re.compile(r'name="nonce" value="([^"]+)"')


def fill(ctx: MemoryContext, entries: int, matching: int, subject: str) -> None:
    """``entries`` audit entries, every ``entries // matching``-th about ``subject``."""
    every = max(entries // matching, 1)
    written = 0
    while written < entries:
        with ctx.store.transaction() as tx:
            for n in range(written, min(written + BATCH, entries)):
                about = subject if n % every == every // 2 and n // every < matching else None
                tx.append_audit(
                    AuditEntry(
                        "bench.entry",
                        namespace=ctx.namespace,
                        subject_ref=about or f"{n:064x}",
                        counts={"n": n},
                    )
                )
        written = min(written + BATCH, entries)
        print(f"  {written:,} entries written", file=sys.stderr)


def timed(client: TestClient, path: str, rounds: int) -> list[float]:
    response = client.get(path)  # warm-up
    response.raise_for_status()
    spent = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = client.get(path)
        spent.append((time.perf_counter() - started) * 1000)
        response.raise_for_status()
    return spent


def signed_in_auditor(ctx: MemoryContext, settings: Settings) -> TestClient:
    token = api_keys.create_api_key(ctx, "auditor").token
    client = TestClient(create_app(ctx, settings))
    nonce = NONCE.search(client.get("/console/signin").text)
    assert nonce is not None
    client.post("/console/signin", data={"api_key": token, "nonce": nonce.group(1)})
    return client


@contextmanager
def database(backend: str, server_url: str) -> Iterator[str | None]:
    if backend == "sqlite":
        yield None  # the embedded store migrates itself on open
    else:
        with postgres_databases(server_url, ["audit"]) as urls:
            scratch = create_backend(urls["audit"])
            try:
                upgrade_schema(scratch.engine)  # what ``oblivio db upgrade`` does
            finally:
                scratch.dispose()
            yield urls["audit"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--matching", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--database-url", default=DEFAULT_SERVER_URL)
    args = parser.parse_args()
    subject = "5" * 64
    with tempfile.TemporaryDirectory() as tmp, database(args.backend, args.database_url) as url:
        settings = Settings(
            data_dir=Path(tmp) / "data",
            database_url=url,
            keyring_path=Path(tmp) / "keyring.json",
        )
        ctx = open_memory(settings)
        try:
            fill(ctx, args.entries, args.matching, subject)
            client = signed_in_auditor(ctx, settings)
            with client:
                pages = {
                    "first page, unfiltered": "/console/audit",
                    f"first page, one subject ({args.matching} match)": (
                        f"/console/audit?subject={subject}"
                    ),
                }
                print(
                    f"audit page, {args.backend}, {args.entries:,} audit entries, "
                    f"{args.rounds} rounds, load average {load_average()}"
                )
                for label, path in pages.items():
                    spent = timed(client, path, args.rounds)
                    print(
                        f"  {label}: median {statistics.median(spent):.1f} ms, "
                        f"slowest {max(spent):.1f} ms"
                    )
        finally:
            ctx.access.close()
            ctx.store.close()


if __name__ == "__main__":
    main()
