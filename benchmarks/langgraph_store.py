"""What OblivioStore operations cost as a person's memories grow (embedded store).

    .venv/bin/python benchmarks/langgraph_store.py [--items 50,200] [--subjects 20]

For each size N it fills one person with N items and prints medians (ms) of put (a new
key), put over an existing key (a supersede), get, search without and with a query,
and delete (certified, waiting for the certificate); then list_namespaces over
``--subjects`` people.  Reads scan the person's stream, so get and search grow with N.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from oblivio import MemoryClient
from oblivio.integrations.langgraph import OblivioStore
from oblivio.settings import Settings


def median_ms(operation: Callable[[int], object], rounds: int = 15) -> float:
    times = []
    for i in range(rounds):
        start = time.perf_counter()
        operation(i)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def run(items: int, store: OblivioStore, user: str) -> dict[str, float]:
    ns = (user, "memories")
    for i in range(items):
        store.put(ns, f"k{i}", {"text": f"fact number {i} about {user}"})
    return {
        "put": median_ms(lambda i: store.put(ns, f"new{i}", {"text": f"new fact {i}"})),
        "put_over": median_ms(lambda i: store.put(ns, "k0", {"text": f"corrected {i}"})),
        "get": median_ms(lambda i: store.get(ns, f"k{i + 1}")),
        "search": median_ms(lambda i: store.search((user,), limit=10)),
        "search_query": median_ms(lambda i: store.search((user,), query=f"fact {i}")),
        "delete": median_ms(lambda i: store.delete(ns, f"new{i}"), rounds=5),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", default="50,200")
    parser.add_argument("--subjects", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = Settings(data_dir=root / "data", keyring_dir=root / "keys")
        with MemoryClient(settings=settings) as client:
            store = OblivioStore(client)
            for n in map(int, args.items.split(",")):
                figures = run(n, store, f"user-{n}")
                print(f"N={n}: " + "  ".join(f"{k} {v:.1f}" for k, v in figures.items()))
            for s in range(args.subjects):
                store.put((f"p{s}", "m"), "k", {"text": "x"})
            ms = median_ms(lambda i: store.list_namespaces(), rounds=5)
            print(f"list_namespaces over {len(client.subjects())} people: {ms:.1f} ms")


if __name__ == "__main__":
    main()
