"""Foreign-namespace ids against unknown ids: do their lookups take the same time?

A key of one namespace that names another namespace's id must get the answer an
unknown id gets (tests/http/test_isolation.py checks the answers); this measures
the other channel, time.  One store, two namespaces with the same people; an
operator key of namespace ``home`` asks, through the real app (Starlette's
TestClient, in process), for ``other``'s node and event ids and for random ids,
interleaved one by one so that drift hits both alike.  Prints the median of each
and their ratio per route; the target is a ratio within 0.90-1.10.

    python benchmarks/foreign_id_lookups.py                        # SQLite, 200 each
    python benchmarks/foreign_id_lookups.py --database-url postgresql://postgres@127.0.0.1:5432/DB

(DB: an empty database it may fill; drop it afterwards.)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from fastapi.testclient import TestClient

from appdata import apikeys
from oblivio.bootstrap import migrate, open_memory
from oblivio.http import create_app
from oblivio.memory import commands, queries
from oblivio.memory.context import MemoryContext
from oblivio.settings import Settings

ROUTES = (
    "/v1/nodes/{node}",
    "/v1/nodes/{node}/assertion-state",
    "/v1/events/{event}",
    "/v1/events/{event}/nodes",
)


def seeded_ids(ctx: MemoryContext, users: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(event id, node id) of one memory of each of ``users`` people in ``ctx``'s namespace."""
    found = []
    for number in range(users):
        user = f"user-{number}"
        event = commands.store(ctx, f"{user} drinks green tea", user_id=user)
        node = queries.get_event_nodes(ctx, event, user_id=user)[0].id
        found.append((event, node))
    return found


def operator_key(ctx: MemoryContext, namespace: str) -> str:
    with ctx.store.transaction() as tx:
        issued = apikeys.issue(
            tx.connection, "operator", None, None, ctx.clock(), namespace=namespace
        )
    return issued[1]


def measure(
    client: TestClient, token: str, foreign: list[tuple[uuid.UUID, uuid.UUID]], n: int
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    print(f"{'route':<36} {'foreign ms':>11} {'unknown ms':>11} {'ratio':>7}  statuses")
    for route in ROUTES:
        times: dict[str, list[float]] = {"foreign": [], "unknown": []}
        statuses: set[tuple[str, int]] = set()
        for i in range(n + 20):  # the first 20 of each warm up and are dropped
            event, node = foreign[i % len(foreign)]
            for kind, (e, nd) in (
                ("foreign", (event, node)),
                ("unknown", (uuid.uuid4(), uuid.uuid4())),
            ):
                url = route.format(event=e, node=nd)
                started = time.perf_counter()
                status = client.get(url, headers=headers).status_code
                if i >= 20:
                    times[kind].append(time.perf_counter() - started)
                statuses.add((kind, status))
        f, u = (statistics.median(times[k]) * 1000 for k in ("foreign", "unknown"))
        print(f"{route:<36} {f:>11.3f} {u:>11.3f} {f / u:>7.3f}  {sorted(statuses)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--users", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        settings = Settings(
            data_dir=Path(scratch) / "data",
            database_url=args.database_url,
            keyring_dir=Path(scratch) / "keys",
            auth_failures_per_minute=0,
            api_key_cache_seconds=1,
        )
        migrate(settings)  # a PostgreSQL database is migrated here, the embedded one on open
        ctx = open_memory(settings)
        try:
            seeded_ids(ctx.tenant("home", cluster_wide=False), args.users)
            foreign = seeded_ids(ctx.tenant("other", cluster_wide=False), args.users)
            token = operator_key(ctx, "home")
            with TestClient(create_app(ctx, settings)) as client:
                print(f"backend {ctx.store.backend_name}, {args.requests} requests of each kind")
                measure(client, token, foreign, args.requests)
        finally:
            ctx.access.close()
            ctx.store.close()


if __name__ == "__main__":
    main()
