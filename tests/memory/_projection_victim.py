"""A process for the kill -9 test of projection commits: it projects, stores more, dies.

Run as ``python -m tests.memory._projection_victim SETTINGS_JSON``.  It stores
``PROJECTED`` memories and lets the vector projection apply them (relaxed
commits), retrieves them and writes their access counts (relaxed too),
prints ``projected``; then stores ``PENDING`` more (durable appends, not
projected), prints ``stored`` and kills itself with SIGKILL: no clean close,
no final flush.
"""

from __future__ import annotations

import os
import signal
import sys

from oblivio import MemoryClient
from oblivio.settings import Settings

USER = "victim"
PROJECTED = 40
PENDING = 7


def texts() -> list[str]:
    return [f"memory {n}: the victim keeps {n} hives of bees" for n in range(PROJECTED + PENDING)]


def main() -> None:
    client = MemoryClient(settings=Settings.model_validate_json(sys.argv[1]))
    ctx = client.context
    for text in texts()[:PROJECTED]:
        client.store(text, user_id=USER)
    ctx.runner.run_pending()
    client.retrieve("hives", user_id=USER)
    ctx.access.flush()
    print("projected", flush=True)
    for text in texts()[PROJECTED:]:
        client.store(text, user_id=USER)
    print("stored", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main()
