"""Two extraction workers racing over one log extract every message exactly once."""

from __future__ import annotations

import threading
import time

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections import events as ev

USERS = ("u1", "u2", "u3")
MESSAGES = ("I use Vim.", "I don't use Vim anymore.", "I live in Oslo.", "I like tea.")


def plans(client: MemoryClient) -> int:
    ns, store = client.context.namespace, client.context.store
    return sum(
        1 for user in USERS for e in store.read_stream(ns, user) if e.type == ev.CLAIMS_EXTRACTED
    )


def test_racing_workers_extract_each_message_once(fresh_settings: Settings) -> None:
    writer = MemoryClient(settings=fresh_settings)
    other = MemoryClient(settings=fresh_settings)
    try:
        for _ in range(3):
            for user in USERS:
                for text in MESSAGES:
                    writer.ingest(text, user_id=user, first_person_owner=True)
        expected = 3 * len(USERS) * len(MESSAGES)
        deadline = time.monotonic() + 30
        stop = threading.Event()
        errors: list[BaseException] = []

        def drain(client: MemoryClient) -> None:
            try:
                while not stop.is_set():
                    client.context.extraction.run_pending()
            except BaseException as e:  # reported below, not lost in the thread
                errors.append(e)

        threads = [threading.Thread(target=drain, args=(c,)) for c in (writer, other)]
        for thread in threads:
            thread.start()
        while plans(writer) < expected and time.monotonic() < deadline and not errors:
            time.sleep(0.05)
        stop.set()
        for thread in threads:
            thread.join(10)
        assert errors == []
        assert plans(writer) == expected
        for user in USERS:
            for name, (live, fresh) in writer.replay_comparison(user_id=user).items():
                assert live == fresh, name
    finally:
        writer.close()
        other.close()
