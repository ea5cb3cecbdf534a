"""Opening facade clients on a test's store, every one closed at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from oblivio import MemoryClient
from oblivio.settings import Settings
from projections.scoring import ScoringConfig

Opener = Callable[..., MemoryClient]


def client_opener(settings: Settings) -> Iterator[Opener]:
    """For a fixture to yield from: ``open_client(scoring=None, **setting_overrides)`` opens
    another client on the store of ``settings``; all of them are closed afterwards."""
    opened: list[MemoryClient] = []

    def open_client(scoring: ScoringConfig | None = None, **overrides: Any) -> MemoryClient:
        chosen = settings.model_copy(update=overrides) if overrides else settings
        client = MemoryClient(settings=chosen, scoring=scoring)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        client.close()
