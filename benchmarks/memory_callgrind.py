"""A fixed embedded (SQLite) workload whose instruction count compares two trees.

Under load, wall-clock A/B figures of ``oblivio bench memory`` move by tens of per cent
from round to round; ``valgrind --tool=callgrind`` counts the instructions a run executes,
which the load does not change.  Phases run cumulatively up to ``CG_UPTO`` (0: open and
close only, 1: + ``CG_N`` stores, 2: + ``CG_N``/2 retrievals, 3: + ``CG_N``/2 ingests,
4: + ``CG_N``/6 single-event deletes to their certificates, 5: + a forget), so the
difference of two counts is one phase's cost.  ``CG_WITHOUT=1`` makes retrieval skip the
likely-update wait, to see what the rest of the path costs (the Art. 18 check rides in the
retrieval service's state token statement and costs no statement of its own).
``CG_CAUGHT_UP=1`` adds one consistent retrieve to the stores' phase, so that the
retrieval phase counts warm retrievals only (the first one's catch-up, the vector
state's and the likely-update detector's work on the stores, then falls in phase 1).

``CG_AFTER_STORE=1`` makes each retrieval of phase 2 come right after a store of its own,
so that every one catches the followers up (the path of the time section's retrieves
right after a store); ``CG_AFTER_STORE=stores`` makes phase 2 those stores alone, the
count to compare it with.  ``CG_DATABASE_URL=postgresql://…/SCRATCH`` runs the workload
on that PostgreSQL database (migrated here, emptied beforehand by the caller) instead of
a temporary SQLite store: the count is then the client's instructions, which neither
the server nor the machine's load changes.

Run it with each tree's interpreter, from a directory outside both trees::

    CG_N=30 CG_UPTO=2 valgrind --tool=callgrind --callgrind-out-file=a.cg \\
        /path/to/tree-a/.venv/bin/python benchmarks/memory_callgrind.py

and read ``Collected : N`` at the end of valgrind's output.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path

from oblivio import MemoryClient
from oblivio.bootstrap import migrate
from oblivio.settings import Settings

N = int(os.environ.get("CG_N", "60"))


def store(m: MemoryClient) -> list[uuid.UUID]:
    return [
        m.store(
            f"fact number {i} about living in town {i % 7} and liking tea {i % 5}", user_id="u1"
        )
        for i in range(N)
    ]


def retrieve(m: MemoryClient) -> None:
    after_store = os.environ.get("CG_AFTER_STORE", "")
    for i in range(N // 2):
        if after_store:
            m.store(f"she moved to town {i % 7} and drinks tea {i % 5}", user_id="u1")
        if after_store != "stores":
            m.retrieve(f"where does she live town {i % 7}", user_id="u1", limit=5)


def ingest(m: MemoryClient) -> None:
    for i in range(N // 2):
        m.ingest(f"I live in town {i}. I like coffee {i}.", user_id="u2")


def delete_events(m: MemoryClient, event_ids: list[uuid.UUID]) -> None:
    for event_id in event_ids[: N // 6]:
        m.delete_event(event_id, wait=True)


def without_named_features() -> None:
    from projections.retrieval_service import RetrievalService

    ranked = RetrievalService.retrieve

    def retrieve_unjudged(*args: object, **kwargs: object) -> object:
        kwargs["judged_by"] = None
        return ranked(*args, **kwargs)  # type: ignore[arg-type]

    RetrievalService.retrieve = retrieve_unjudged  # type: ignore[method-assign,assignment]


def opened(directory: str) -> MemoryClient:
    """The store the workload runs on: SQLite in ``directory``, or ``CG_DATABASE_URL``."""
    url = os.environ.get("CG_DATABASE_URL")
    if url is None:
        return MemoryClient(os.path.join(directory, "data"), embedder="hashing")
    settings = Settings(
        data_dir=Path(directory, "data"),
        database_url=url,
        keyring_path=Path(directory, "keys", "keyring.json"),
        embedder="hashing",
    )
    migrate(settings)  # a server's schema is upgraded by the operator, not on open
    return MemoryClient(settings=settings)


def main() -> None:
    if os.environ.get("CG_WITHOUT"):
        without_named_features()
    upto = int(os.environ.get("CG_UPTO", "5"))
    with tempfile.TemporaryDirectory() as d:
        os.environ["OBLIVIO_KEYRING_DIR"] = os.path.join(d, "keys")
        with opened(d) as m:
            event_ids = store(m) if upto >= 1 else []
            if upto >= 1 and os.environ.get("CG_CAUGHT_UP"):
                m.retrieve("where does she live town 1", user_id="u1", limit=5)
            if upto >= 2:
                retrieve(m)
            if upto >= 3:
                ingest(m)
            if upto >= 4:
                delete_events(m, event_ids)
            if upto >= 5:
                m.forget("u1", wait=True)


if __name__ == "__main__":
    main()
