"""What OblivioStore operations cost as a person's memories grow (embedded store).

    .venv/bin/python benchmarks/langgraph_store.py [--items 100,5000] [--subjects 20]
        [--embedder hashing]

For each size N it fills one person with N items and prints medians (ms) of put (a new
key), put over an existing key (a supersede), get, search without and with a query,
and delete (certified, waiting for the certificate); then the ratio of each figure at
the largest N to the smallest, and list_namespaces over ``--subjects`` people.  get and
put find the item by its keyed hash, so their ratios stay near 1; search lists the
person's items and delete rebuilds the person's node graph, so those grow with N.
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
        "delete": median_ms(lambda i: store.delete(ns, f"new{i}"), rounds=3),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", default="100,5000")
    parser.add_argument("--subjects", type=int, default=20)
    parser.add_argument("--embedder", default="hashing", help="an embedder name (fills faster)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = Settings(data_dir=root / "data", keyring_dir=root / "keys")
        with MemoryClient(settings=settings, embedder=args.embedder) as client:
            store = OblivioStore(client)
            sizes = [int(n) for n in args.items.split(",")]
            by_size = {}
            for n in sizes:
                by_size[n] = figures = run(n, store, f"user-{n}")
                print(f"N={n}: " + "  ".join(f"{k} {v:.1f}" for k, v in figures.items()))
            small, large = by_size[min(sizes)], by_size[max(sizes)]
            ratios = "  ".join(f"{k} {large[k] / small[k]:.2f}" for k in small)
            print(f"N={max(sizes)} / N={min(sizes)}: {ratios}")
            for s in range(args.subjects):
                store.put((f"p{s}", "m"), "k", {"text": "x"})
            ms = median_ms(lambda i: store.list_namespaces(), rounds=5)
            print(f"list_namespaces over {len(client.subjects())} people: {ms:.1f} ms")


if __name__ == "__main__":
    main()
