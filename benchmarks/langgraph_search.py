"""OblivioStore.search with a query against MemoryClient.retrieve on the same person.

    .venv/bin/python benchmarks/langgraph_search.py [--items 10000] [--rounds 31]
        [--embedder wordllama] [--database-url URL]

One person's ``--items`` documents are written with ``OblivioStore.put`` (timed apart),
and five more in a second namespace of the same person, then each round runs one
``search(namespace, query=…, limit=10)``, one ``retrieve(query, limit=10)`` of the same
query and one search of the small namespace (which the ranking must not fill with the
large one's items), alternating, so drift in the machine's speed affects all alike.
Prints the medians and 99th percentiles (ms) and the ratios of the medians (issue 33's
target: at most 3 at 10,000 items).  A search pages through the ranking of the index
retrieve uses, and reads only the documents of its page.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from oblivio import MemoryClient
from oblivio.integrations.langgraph import OblivioStore
from oblivio.settings import Settings

#: Documents in the person's second namespace.
SMALL = 5
WORDS = [
    "tea",
    "garden",
    "bicycle",
    "river",
    "piano",
    "winter",
    "lemon",
    "city",
    "train",
    "book",
    "coffee",
    "mountain",
]


def text(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=8))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument("--embedder", default="wordllama")
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            data_dir=Path(tmp) / "data",
            database_url=args.database_url,
            keyring_path=Path(tmp) / "keyring.json",
        )
        with MemoryClient(settings=settings, embedder=args.embedder) as client:
            store = OblivioStore(client, user_segment=1)
            started = time.perf_counter()
            for i in range(args.items):
                store.put(("memories", "ada"), f"k{i}", {"text": text(rng), "n": i})
            for i in range(SMALL):
                store.put(("profile", "ada"), f"p{i}", {"text": text(rng), "n": i})
            print(f"put {args.items:,} items in {time.perf_counter() - started:,.1f} s")
            client.context.runner.run_pending()  # the vectors catch up: not timed
            client.retrieve("warm up", user_id="ada")  # loads the index: not timed
            searches, retrieves, small = [], [], []
            for _ in range(args.rounds):
                query = text(rng)
                t0 = time.perf_counter()
                found = store.search(("memories", "ada"), query=query, limit=10)
                t1 = time.perf_counter()
                client.retrieve(query, user_id="ada", limit=10)
                t2 = time.perf_counter()
                profile = store.search(("profile", "ada"), query=query, limit=10)
                t3 = time.perf_counter()
                assert len(found) == 10
                assert len(profile) == SMALL
                searches.append((t1 - t0) * 1000)
                retrieves.append((t2 - t1) * 1000)
                small.append((t3 - t2) * 1000)
    for name, values in (("search", searches), ("retrieve", retrieves), ("small ns", small)):
        ordered = sorted(values)
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
        print(f"{name:9} p50 {statistics.median(values):8.2f} ms   p99 {p99:8.2f} ms")
    base = statistics.median(retrieves)
    print(f"search / retrieve (p50): {statistics.median(searches) / base:.2f}")
    print(f"small-namespace search / retrieve (p50): {statistics.median(small) / base:.2f}")


if __name__ == "__main__":
    main()
