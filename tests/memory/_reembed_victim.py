"""A worker process for the kill -9 test: works on re-embedding jobs slowly, until killed.

Run as ``python -m tests.memory._reembed_victim SETTINGS_JSON``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from datetime import timedelta

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections.embedders import HashingEmbedder
from projections.store_embedders import StoreEmbedders
from workers.reembed import VectorRebuilder

LEASE = timedelta(seconds=2)
BATCH = 5


class Slow(HashingEmbedder):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        time.sleep(0.2)  # long enough for the test to kill it mid-job
        return super().embed(texts)


def main() -> None:
    settings = Settings.model_validate_json(sys.argv[1])
    with MemoryClient(settings=settings) as client:
        ctx = client.context
        embedders = StoreEmbedders(Slow(64), "hashing:64")
        worker = VectorRebuilder(
            ctx.store,
            embedders,
            ctx.runner,
            ctx.clock,
            worker_id="victim",
            batch=BATCH,
            lease=LEASE,
        )
        worker.run_pending()


if __name__ == "__main__":
    main()
