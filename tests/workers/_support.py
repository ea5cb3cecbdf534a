"""Helpers of the worker tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from workers.follower import LogFollower


@contextmanager
def running(follower: LogFollower) -> Iterator[list[BaseException]]:
    """``follower`` doing every page it finds, on a thread of its own, while the block
    runs: the errors it raised (for the test to check after the block)."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            while not stop.is_set():
                if not follower.run_pending():
                    time.sleep(0.002)
        except BaseException as e:  # reported by the test
            errors.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield errors
    finally:
        stop.set()
        thread.join(timeout=60)
