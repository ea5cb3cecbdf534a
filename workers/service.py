"""A worker process: projection runner, rebuild workers and scheduler, with graceful stop.

``run()`` starts the loops in threads and returns; ``stop()`` only sets an
event, and ``join()`` waits for the loops to finish their current batch.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from apscheduler.schedulers.background import BackgroundScheduler

from workers.extraction import ExtractionWorker
from workers.projector import ProjectionRunner
from workers.rebuild import RebuildWorker
from workers.reembed import VectorRebuilder
from workers.scheduler import Maintenance, start_scheduler
from workers.snapshots import SnapshotBuilder
from workers.updates import LikelyUpdateWorker

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT = 30.0


class WorkerService:
    """Runs the asynchronous parts of oblivio inside one process."""

    def __init__(
        self,
        runner: ProjectionRunner,
        rebuilder: RebuildWorker,
        maintenance: Maintenance | None,
        poll_interval: float = 0.2,
        *,
        extraction: ExtractionWorker | None = None,
        updates: LikelyUpdateWorker | None = None,
        reembedder: VectorRebuilder | None = None,
        snapshots: SnapshotBuilder | None = None,
    ) -> None:
        self.runner = runner
        self.extraction = extraction
        self.updates = updates
        self.rebuilder = rebuilder
        self.reembedder = reembedder
        self.snapshots = snapshots
        self.maintenance = maintenance
        self.poll_interval = poll_interval
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._scheduler: BackgroundScheduler | None = None

    def run(self) -> None:
        self._spawn(
            "projection-runner", lambda: self.runner.run_forever(self._stop, self.poll_interval)
        )
        self._spawn(
            "rebuild-worker", lambda: self.rebuilder.run_forever(self._stop, self.poll_interval)
        )
        if self.extraction is not None:
            extraction = self.extraction
            self._spawn(
                "claims-extraction", lambda: extraction.run_forever(self._stop, self.poll_interval)
            )
        if self.updates is not None:
            detector = self.updates
            self._spawn(
                "likely-updates", lambda: detector.run_forever(self._stop, self.poll_interval)
            )
        reembedder = self.reembedder
        if reembedder is not None:
            self._spawn(
                "vector-rebuilder",
                lambda: reembedder.run_forever(self._stop, self.poll_interval),
            )
        snapshots = self.snapshots
        if snapshots is not None:
            self._spawn(
                "snapshot-builder", lambda: snapshots.run_forever(self._stop, self.poll_interval)
            )
        if self.maintenance is not None:
            self._scheduler = start_scheduler(self.maintenance)

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float = SHUTDOWN_TIMEOUT) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
        for thread in self._threads:
            thread.join(timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _spawn(self, name: str, loop: Callable[[], None]) -> None:
        def guarded() -> None:
            # A failing loop must not die silently: log, pause, and go on.
            while not self._stop.is_set():
                try:
                    loop()
                except Exception:
                    log.exception("%s failed; restarting", name)
                    self._stop.wait(1.0)

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)
