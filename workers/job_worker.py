"""What the leased job workers share: their identity, a lost lease, the polling loop."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from abc import ABC, abstractmethod


class LeaseLostError(RuntimeError):
    """Another worker took this job over after our lease expired."""


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class JobWorker(ABC):
    """A worker that takes one leased unit of work at a time (``run_once``)."""

    @abstractmethod
    def run_once(self) -> bool:
        """Claim and process one unit; False when there was nothing to do."""

    def run_pending(self) -> int:
        done = 0
        while self.run_once():
            done += 1
        return done

    def run_forever(self, stop: threading.Event, poll_interval: float = 0.5) -> None:
        # One unit per turn, so a stop request is seen between units.
        while not stop.is_set():
            if not self.run_once():
                stop.wait(poll_interval)
