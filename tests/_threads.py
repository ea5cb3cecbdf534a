"""Running calls at the same moment, one thread each, to test what races do."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

WAIT_SECONDS = 30.0


def race(calls: Sequence[Callable[[], Any]], timeout: float = WAIT_SECONDS) -> list[Any]:
    """Run ``calls`` in threads released together by a barrier; what each returned, or the
    exception it raised, in their order.  Fails if one is still running after ``timeout``."""
    results: list[Any] = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(index: int) -> None:
        barrier.wait(timeout)
        try:
            results[index] = calls[index]()
        except Exception as e:  # an outcome the caller asserts on
            results[index] = e

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a racing call did not finish"
    return results
