"""What OblivioStore operations cost as a person's memories grow (embedded store).

    .venv/bin/python benchmarks/langgraph_store.py [--items 100,5000] [--subjects 20]
        [--embedder hashing]

For each size N it fills one person with N items and prints medians (ms) of put (a new
key), put over an existing key (a supersede), get, search without and with a query,
delete (certified: it waits for the certificate) and the delete call alone (without
waiting); then the ratio of each figure at the largest N to the smallest, and
list_namespaces over ``--subjects`` people.  get and put find the item by its keyed
hash, so their ratios stay near 1; search lists the person's items, so it grows with N;
the delete call re-derives only what the item's revisions reached, so its ratio stays
near 1 too, while the certificate's rebuild jobs replay the person, which grows with N.
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


def operations(store: OblivioStore, user: str) -> dict[str, tuple[Callable[[int], object], int]]:
    """Each measured operation on one person's items, with its number of rounds.

    ``delete`` waits for the certificate, whose rebuild jobs replay the person;
    ``delete_call`` is the call alone (what the caller waits for without ``wait``)."""
    ns = (user, "memories")
    unwaited = OblivioStore(store.client, user_segment=0, wait=False)
    return {
        "put": (lambda i: store.put(ns, f"new{i}", {"text": f"new fact {i}"}), 15),
        "put_over": (lambda i: store.put(ns, "k0", {"text": f"corrected {i}"}), 15),
        "get": (lambda i: store.get(ns, f"k{i + 1}"), 15),
        "search": (lambda i: store.search((user,), limit=10), 5),
        "search_query": (lambda i: store.search((user,), query=f"fact {i}"), 5),
        "delete": (lambda i: store.delete(ns, f"new{i}"), 3),
        "delete_call": (lambda i: unwaited.delete(ns, f"new{i + 3}"), 7),
    }


def fill(store: OblivioStore, user: str, items: int) -> None:
    for i in range(items):
        store.put((user, "memories"), f"k{i}", {"text": f"fact number {i} about {user}"})


def interleaved_medians(store: OblivioStore, sizes: list[int]) -> dict[int, dict[str, float]]:
    """Median ms of each operation per size; the sizes take turns in every round, so a
    change in the machine's load reaches all of them alike."""
    ops = {n: operations(store, f"user-{n}") for n in sizes}
    times: dict[int, dict[str, list[float]]] = {n: {} for n in sizes}
    for name, (_, rounds) in ops[sizes[0]].items():
        for i in range(rounds):
            for n in sizes:
                start = time.perf_counter()
                ops[n][name][0](i)
                times[n].setdefault(name, []).append((time.perf_counter() - start) * 1000)
    return {n: {k: statistics.median(v) for k, v in t.items()} for n, t in times.items()}


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
            store = OblivioStore(client, user_segment=0)
            sizes = [int(n) for n in args.items.split(",")]
            for n in sizes:
                fill(store, f"user-{n}", n)
            by_size = interleaved_medians(store, sizes)
            for n, figures in by_size.items():
                print(f"N={n}: " + "  ".join(f"{k} {v:.1f}" for k, v in figures.items()))
            small, large = by_size[min(sizes)], by_size[max(sizes)]
            ratios = "  ".join(f"{k} {large[k] / small[k]:.2f}" for k in small)
            print(f"N={max(sizes)} / N={min(sizes)}: {ratios}")
            for s in range(args.subjects):
                store.put((f"p{s}", "m"), "k", {"text": "x"})
            ms = statistics.median(_timed(store.list_namespaces) for _ in range(5))
            print(f"list_namespaces over {len(client.subjects())} people: {ms:.1f} ms")


def _timed(operation: Callable[[], object]) -> float:
    start = time.perf_counter()
    operation()
    return (time.perf_counter() - start) * 1000


if __name__ == "__main__":
    main()
