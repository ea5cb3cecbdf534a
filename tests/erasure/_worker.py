"""A rebuild worker process for the crash tests.

    python -m tests.erasure._worker '<json config>'

The config names the store (``settings``: data_dir, database_url, keyring_path), the
worker's ``worker_id`` and ``lease`` (seconds; the policy's default when absent), how
long to ``stall`` inside each job's rebuild transaction (after rebuilding, before
marking the job done), a ``progress`` file to write the job id to while stalling, and
when to stop: after ``run_for`` seconds, or as soon as request ``until_request`` is
completed or failed.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from eventstore import Transaction
from oblivio import MemoryClient
from oblivio.memory.compliance import erasure_status
from oblivio.settings import Settings
from projections.base import Projection
from tests.erasure._support import rebuild_worker
from workers.policy import ErasurePolicy
from workers.rebuild import RebuildWorker


class StallingWorker(RebuildWorker):
    """Holds each job (and its transaction) open for ``stall`` seconds before finishing it."""

    stall: float = 0.0
    progress: Path | None = None
    current_job: str = ""

    def _process(self, job: Any) -> None:
        self.current_job = str(job.job_id)
        super()._process(job)

    def _rebuild(
        self, tx: Transaction, projection: Projection, stream_id: int | None
    ) -> dict[str, str]:
        results = super()._rebuild(tx, projection, stream_id)
        if self.stall:
            if self.progress is not None:
                self.progress.write_text(self.current_job)
            time.sleep(self.stall)
        return results


def build_worker(client: MemoryClient, config: dict[str, Any]) -> StallingWorker:
    policy = (
        ErasurePolicy(lease=timedelta(seconds=float(config["lease"])))
        if "lease" in config
        else ErasurePolicy()  # the default lease and heartbeat
    )
    worker = rebuild_worker(client, policy, StallingWorker, worker_id=str(config["worker_id"]))
    worker.stall = float(config.get("stall", 0.0))
    progress = config.get("progress")
    worker.progress = None if progress is None else Path(progress)
    return worker


def finished(client: MemoryClient, request_id: str | None) -> bool:
    if request_id is None:
        return False
    return erasure_status(client.context, request_id).status in ("completed", "failed")


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    settings = Settings(**config["settings"])
    deadline = time.monotonic() + float(config.get("run_for", 20.0))
    with MemoryClient(settings=settings) as client:
        worker = build_worker(client, config)
        print(f"worker {worker.worker_id} ready", flush=True)
        while time.monotonic() < deadline:
            if finished(client, config.get("until_request")):
                print("request finished", flush=True)
                return 0
            if not worker.run_once():
                time.sleep(0.05)
    print("worker stopped at its deadline", flush=True)
    return 0 if config.get("until_request") is None else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv))
