"""Failed authentications counted per client address, so keys cannot be guessed at speed.

After ``limit`` failed authentications from one address within ``window``
seconds, every request from that address that carries a key answers 429 with
``Retry-After`` until the oldest of those failures leaves the window, without
its key being checked: a correct guess must not be told apart from a wrong
one while the address is refused.  Requests without any key are not counted
(they guess nothing).  The counts live in this process: several API processes
each allow ``limit`` per window.  An address is the one the server can vouch for:
the peer that connected, or, when that peer is a proxy the operator named
(``OBLIVIO_TRUSTED_PROXIES``), the client that proxy says it forwards for
(``oblivio.http.server``); a header anyone else sends is ignored.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

#: Addresses followed at once; the least recently failing is forgotten first,
#: so a flood of spoofed sources cannot grow memory without bound.
MAX_TRACKED_ADDRESSES = 10_000


class FailedAuthThrottle:
    """At most ``limit`` failed authentications per address per ``window`` seconds (0: off)."""

    def __init__(
        self, limit: int, window: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def retry_after(self, address: str) -> int:
        """Seconds until ``address`` may try again; 0 when it may now."""
        if not self.limit:
            return 0
        now = self._clock()
        with self._lock:
            failures = self._failures.get(address)
            if failures is None:
                return 0
            while failures and failures[0] <= now - self.window:
                failures.popleft()
            if len(failures) < self.limit:
                return 0
            return max(1, math.ceil(failures[0] + self.window - now))

    def failed(self, address: str) -> None:
        if not self.limit:
            return
        with self._lock:
            failures = self._failures.pop(address, None) or deque(maxlen=self.limit)
            failures.append(self._clock())
            self._failures[address] = failures
            while len(self._failures) > MAX_TRACKED_ADDRESSES:
                self._failures.popitem(last=False)
