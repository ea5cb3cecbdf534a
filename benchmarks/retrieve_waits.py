"""How often a consistent retrieve waits for PostgreSQL, counted from libpq's trace.

The same count as ``tests/memory/test_retrieve_round_trips.py`` (which pins the first
two), for three retrieves: right after a plain store, warm, and right after a store
whose text holds a change cue (the likely-update detector judges it), with the retrieve
after that one.  Load does not change these counts, so they compare two trees on a busy
machine::

    python benchmarks/retrieve_waits.py postgresql://postgres@127.0.0.1:5432/SCRATCH

(an empty database, migrated here).  Prints the last three rounds of each.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from oblivio import MemoryClient
from oblivio.bootstrap import migrate
from oblivio.settings import Settings
from tests.memory._support import round_trips


def main(url: str) -> None:
    data = Path(tempfile.mkdtemp())
    settings = Settings(data_dir=data, database_url=url, keyring_path=data / "keyring.json")
    migrate(settings)  # a server's schema is upgraded by the operator, not on open
    with MemoryClient(settings=settings) as client:
        for n in range(20):
            client.store(f"Alice walked by the river on day {n}", user_id="alice")
        client.store("Alice lives in Boston", user_id="alice")
        client.retrieve("river", user_id="alice")

        def counted(text: str, query: str) -> int:
            client.store(text, user_id="alice")
            client.context.access.flush()  # no access count is written meanwhile
            return round_trips(lambda: client.retrieve(query, user_id="alice"))

        def warm(query: str) -> int:
            client.context.access.flush()
            return round_trips(lambda: client.retrieve(query, user_id="alice"))

        # Enough rounds for each repeated statement's fifth use (psycopg prepares it then).
        plain = [(counted(f"Alice drank tea number {n}", "tea"), warm("river")) for n in range(12)]
        cities = ("Denver", "Austin", "Miami", "Tulsa", "Boise", "Omaha")
        cued = [
            (
                counted(f"Alice moved to {city}, she no longer lives in Boston", "where"),
                warm("live"),
            )
            for city in cities
        ]
    print(f"right after a store, warm: {plain[-3:]}")
    print(f"right after a store with a change cue, the retrieve after it: {cued[-3:]}")


if __name__ == "__main__":
    main(sys.argv[1])
