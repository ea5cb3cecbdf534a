"""The systems a benchmark times, behind one small port, and oblivio's adapter.

A :class:`System` is a picklable description of one system on one database:
it crosses into writer processes started with ``spawn``, where
:meth:`System.open` builds a :class:`Session` with that process's own
connections.  Every workload talks to sessions only, so each one is written
once and runs the same way against oblivio and against the library it is
compared with.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from eventstore import START, EventStore, NewEvent, OblivioError
from oblivio.bootstrap import migrate, open_event_store
from oblivio.settings import Settings

#: What one event carries: a JSON object of about 140 bytes.
Payload = Mapping[str, Any]

NAMESPACE = "bench"
OBLIVIO_NOTES = (
    "AES-256-GCM on every payload and metadata under a per-subject key, "
    "SHA-256 hash chain per stream, per-stream row lock, subject ids as keyed HMAC"
)
EVENT_TYPE = "memory.stored"


class BenchError(OblivioError):
    """The benchmark could not run to the end."""


class Session(Protocol):
    """One process's handle on a system under test."""

    def append(self, stream: str, version: int, payloads: Sequence[Payload]) -> None:
        """Append ``payloads`` to ``stream`` (now at ``version``) in one transaction."""

    def read_stream(self, stream: str) -> int:
        """Read and decode a whole stream; return how many events it holds."""

    def log_pages(self, page_size: int) -> Iterator[int]:
        """Read the global log from its start; yield the size of each decoded page."""

    def close(self) -> None:
        """Release the session's connections."""


class System(Protocol):
    """A system under test on its own database; picklable."""

    @property
    def name(self) -> str:
        """Short name used in tables and JSON."""

    @property
    def notes(self) -> str:
        """What the system does for each event (what the figures include)."""

    def open(self) -> Session:
        """A session with connections of the calling process."""


class OblivioSession:
    """oblivio's :class:`~eventstore.EventStore`, as the composition root opens it."""

    def __init__(self, store: EventStore) -> None:
        self.store = store

    def append(self, stream: str, version: int, payloads: Sequence[Payload]) -> None:
        new_events = [NewEvent(EVENT_TYPE, payload) for payload in payloads]
        self.store.append(NAMESPACE, stream, new_events, expected_version=version)

    def read_stream(self, stream: str) -> int:
        return len(self.store.read_stream(NAMESPACE, stream))

    def log_pages(self, page_size: int) -> Iterator[int]:
        cursor = START
        while True:
            page = self.store.read_all(cursor, page_size)
            if not page.events:
                return
            yield len(page.events)
            cursor = page.next_cursor

    def close(self) -> None:
        self.store.close()


@dataclass(frozen=True)
class OblivioSystem:
    """oblivio's event log in a data directory (SQLite) or on a PostgreSQL database."""

    settings: Settings
    #: ``oblivio``, or where it runs when a run measures it in two places (``citus``).
    name: str = "oblivio"
    notes: str = OBLIVIO_NOTES

    @classmethod
    def create(
        cls, data_dir: Path, database_url: str | None, name: str = "oblivio", where: str = ""
    ) -> OblivioSystem:
        """Migrate a fresh database and create its keyring once, before any writer races to.

        ``where``: what the notes say of the database, when it matters (a cluster).
        """
        # The scratch keyring sits beside the scratch data, so nothing is left behind.
        keyring = data_dir.with_name(f"{data_dir.name}-keyring.json")
        settings = Settings(data_dir=data_dir, database_url=database_url, keyring_path=keyring)
        migrate(settings)
        open_event_store(settings).close()
        return cls(settings, name, f"{where}; {OBLIVIO_NOTES}" if where else OBLIVIO_NOTES)

    def open(self) -> OblivioSession:
        return OblivioSession(open_event_store(self.settings))
