"""Value objects of the log: what callers append and what they read back."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from eventstore.codec import SubjectCipher


class _AnyVersion(enum.Enum):
    ANY = "any"


#: Pass as ``expected_version`` to append without a concurrency check.
ANY: Final = _AnyVersion.ANY
ExpectedVersion = int | _AnyVersion


class Erasure(enum.StrEnum):
    """Why an event's content can no longer be read."""

    TOMBSTONED = "tombstoned"  # payload rows removed by an erasure request
    KEY_DESTROYED = "key_destroyed"  # the subject's data key no longer exists
    KEY_RETIRED = "key_retired"  # the KEK wrapping the data key was retired before re-wrapping


@dataclass(frozen=True)
class NewEvent:
    """An event to append. ``event_id`` makes the append idempotent."""

    type: str
    data: Mapping[str, Any]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    event_id: uuid.UUID | None = None
    schema_version: int = 1


@dataclass(frozen=True, slots=True)
class Subject:
    """A data subject as callers name it: the raw id, hashed before it reaches the log."""

    namespace: str
    subject: str


@dataclass(frozen=True, slots=True)
class StreamRef:
    """Where an event lives. The raw subject id is never stored, only its keyed hash."""

    stream_id: int
    namespace: str
    subject_key: bytes
    generation: int


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """An event as stored. ``data``/``metadata`` are ``None`` once erased.

    Slotted, and its place in the global order kept as two integers (the
    :class:`LogCursor` is made on demand): a read keeps one of these per event
    alive until it returns, and every extra object per event (an instance
    dictionary, a cursor) is more work for the allocator and the cyclic
    garbage collector on large reads.
    """

    event_id: uuid.UUID
    stream: StreamRef
    version: int
    position: int
    commit_group: int
    type: str
    schema_version: int
    recorded_at: datetime
    data: dict[str, Any] | None
    metadata: dict[str, Any] | None
    digest: bytes
    chain_hash: bytes
    erasure: Erasure | None = None
    erasure_request_id: uuid.UUID | None = None

    @property
    def erased(self) -> bool:
        return self.erasure is not None

    @property
    def cursor(self) -> LogCursor:
        """Where this event is in the global order (see :class:`LogCursor`)."""
        return LogCursor(self.commit_group, self.position)


@dataclass(frozen=True, order=True, slots=True)
class LogCursor:
    """A point in the global order of the log.

    The global order is ``(commit_group, position)``.  On SQLite the group is
    always 0 and the order is simply the position.  On PostgreSQL the group is
    the writing transaction's id; see :mod:`eventstore.backends.postgres` for why that
    makes the order safe against late commits.
    """

    commit_group: int = 0
    position: int = 0

    def __str__(self) -> str:
        return f"{self.commit_group}:{self.position}"

    @classmethod
    def parse(cls, text: str) -> LogCursor:
        group, _, position = text.partition(":")
        return cls(int(group), int(position))


START: Final = LogCursor(0, 0)


@dataclass(frozen=True)
class LogPage:
    """One page of the global log and the cursor to continue from."""

    events: list[RecordedEvent]
    next_cursor: LogCursor
    #: The ciphers of the page's streams, from the read that decrypted its events
    #: (``None``: the stream's key is destroyed): a follower that writes projection
    #: rows of the page seals them with these, and drops them with the page.
    ciphers: Mapping[int, SubjectCipher | None] = field(
        default_factory=dict, repr=False, compare=False
    )


@dataclass(frozen=True)
class StreamHead:
    """The latest version and chain hash of a stream."""

    stream: StreamRef
    version: int
    chain_hash: bytes
    closed_at: datetime | None
    key_destroyed_at: datetime | None


@dataclass(frozen=True)
class ChainBreak:
    """The first place where the integrity chain does not verify."""

    stream_id: int
    version: int
    event_id: uuid.UUID | None
    reason: str


@dataclass(frozen=True)
class VerifyReport:
    """Result of walking the integrity chain of one or all streams."""

    streams_checked: int
    events_checked: int
    first_break: ChainBreak | None

    @property
    def ok(self) -> bool:
        return self.first_break is None


@dataclass(frozen=True)
class Tombstone:
    """What remains of an erased event."""

    event_id: uuid.UUID
    version: int
    position: int
    type: str
    digest: bytes
    chain_hash: bytes
    erasure_request_id: uuid.UUID


@dataclass(frozen=True)
class KeyDestruction:
    """Proof-relevant facts about a destroyed data key."""

    dek_id: uuid.UUID
    kek_version: int  # residual wrapped copies need this KEK version to be unwrapped
    destroyed_at: datetime
