"""What every projection offers the workers that run, rebuild and certify it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy.engine import Connection

from eventstore import RecordedEvent, SubjectCipher


class Projection(Protocol):
    """A named, versioned function of the log, kept in tables.

    ``apply`` is called with events in log order within one stream;
    ``apply_page`` with a page of them (of any streams, each with its
    stream's cipher), so a projection can batch its work, and must leave the
    state that applying them one by one would; ``purge`` removes everything
    derived from one stream; ``digest`` summarises one stream's state so a
    live projection can be compared with a fresh replay.
    """

    name: str
    version: int

    def apply(self, conn: Connection, cipher: SubjectCipher, event: RecordedEvent) -> None: ...

    def apply_page(
        self, conn: Connection, page: Sequence[tuple[SubjectCipher, RecordedEvent]]
    ) -> None: ...

    def purge(self, conn: Connection, stream_id: int) -> None: ...

    def digest(self, conn: Connection, cipher: SubjectCipher | None, stream_id: int) -> str: ...
