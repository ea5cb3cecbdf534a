"""What the leased job workers share: their identity, a lost lease, the polling loop."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)


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


@contextlib.contextmanager
def lease_kept(renew: Callable[[], bool], every: float, name: str) -> Iterator[None]:
    """Call ``renew`` every ``every`` seconds from a thread of its own while the block runs.

    ``renew`` extends the lease on the unit ``name`` and answers whether it still
    holds it; a renewal that fails is retried at the next beat (three missed beats
    lose a lease), one that answers False (finished meanwhile, or taken over) ends
    the beats.
    """
    done = threading.Event()

    def beat() -> None:
        while not done.wait(every):
            try:
                held = renew()
            except Exception:
                log.warning("could not renew the lease on %s", name, exc_info=True)
                continue
            if not held:
                return

    beats = threading.Thread(target=beat, name=f"lease {name}", daemon=True)
    beats.start()
    try:
        yield
    finally:
        done.set()
        beats.join()
