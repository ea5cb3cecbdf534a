"""The ``eventsourcing`` library (9.5) as a benchmark system: its default recorders.

The recorder comes from ``InfrastructureFactory.construct`` configured through
the environment mapping, exactly as an ``eventsourcing`` application would get
it: ``PERSISTENCE_MODULE=eventsourcing.sqlite`` or ``eventsourcing.postgres``
and nothing else, so neither its cipher nor its compressor is enabled and
payloads are stored as plain JSON.  Events are ``StoredEvent`` objects whose
state is the payload encoded by the factory's default transcoder, and reads
decode it again, so both systems hand the caller decoded JSON.

This module imports ``eventsourcing`` (the ``bench`` extra); it is imported
only when a comparison is asked for.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlsplit

from eventsourcing.persistence import (
    ApplicationRecorder,
    InfrastructureFactory,
    StoredEvent,
    Transcoder,
)

from oblivio_bench.systems import EVENT_TYPE, Payload

# Stream names map to the UUIDs eventsourcing identifies aggregates by.
_STREAM_IDS = uuid.UUID("6f3c0a52-8d1e-4d4b-9a0e-0b1e7c5d2a91")


def stream_uuid(stream: str) -> uuid.UUID:
    return uuid.uuid5(_STREAM_IDS, stream)


def library_version() -> str:
    return version("eventsourcing")


class EventsourcingSession:
    """An ``ApplicationRecorder`` and the transcoder of one infrastructure factory."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.factory = InfrastructureFactory.construct(env=dict(env))
        self.recorder: ApplicationRecorder = self.factory.application_recorder()
        self.transcoder: Transcoder = self.factory.transcoder()

    def append(self, stream: str, version: int, payloads: Sequence[Payload]) -> None:
        originator_id = stream_uuid(stream)
        self.recorder.insert_events(
            [
                StoredEvent(originator_id, version + offset, EVENT_TYPE, self.transcoder.encode(p))
                for offset, p in enumerate(payloads, start=1)
            ]
        )

    def read_stream(self, stream: str) -> int:
        stored = self.recorder.select_events(stream_uuid(stream))
        return len([self.transcoder.decode(e.state) for e in stored])

    def log_pages(self, page_size: int) -> Iterator[int]:
        last = 0
        while True:
            page = self.recorder.select_notifications(last, page_size, inclusive_of_start=False)
            if not page:
                return
            yield len([self.transcoder.decode(n.state) for n in page])
            last = page[-1].id

    def close(self) -> None:
        self.factory.close()


@dataclass(frozen=True)
class EventsourcingSystem:
    """The library's default application recorder, configured through its environment."""

    env: Mapping[str, str]
    name: ClassVar[str] = "eventsourcing"

    @property
    def notes(self) -> str:
        return (
            f"eventsourcing {library_version()}, {self.env['PERSISTENCE_MODULE']} default "
            "ApplicationRecorder: no cipher, no compressor (payloads stored as plain JSON), "
            "optimistic concurrency from the primary key"
            + (", EXCLUSIVE table lock per insert" if "POSTGRES_DBNAME" in self.env else "")
        )

    @classmethod
    def sqlite(cls, path: Path) -> EventsourcingSystem:
        return cls({"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(path)})

    @classmethod
    def postgres(cls, database_url: str) -> EventsourcingSystem:
        return cls({"PERSISTENCE_MODULE": "eventsourcing.postgres", **postgres_env(database_url)})

    def open(self) -> EventsourcingSession:
        return EventsourcingSession(self.env)


def postgres_env(database_url: str) -> dict[str, str]:
    """The library's ``POSTGRES_*`` settings for a ``postgresql://`` URL."""
    url = urlsplit(database_url)
    return {
        "POSTGRES_DBNAME": unquote(url.path.lstrip("/")),
        "POSTGRES_HOST": url.hostname or "127.0.0.1",
        "POSTGRES_PORT": str(url.port or 5432),
        "POSTGRES_USER": unquote(url.username or "postgres"),
        "POSTGRES_PASSWORD": unquote(url.password or ""),
    }
