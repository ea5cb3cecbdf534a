"""The oblivio event log.

An append-only log with one stream per (namespace, subject), encrypted under
per-subject data keys, hash-chained per stream, ordered globally, and with
the primitives erasure builds on (tombstones, key destruction, stream
generations, a content-free audit stream).  SQLite is the embedded default;
PostgreSQL serves many processes.
"""

from __future__ import annotations

from eventstore.audit import AuditEntry
from eventstore.backends import Backend, create_backend
from eventstore.codec import DEFAULT_MAX_EVENT_BYTES, SubjectCipher
from eventstore.errors import (
    ConflictError,
    DuplicateEventError,
    EventErasedError,
    EventUnavailableError,
    IntegrityViolationError,
    InvalidEncodingError,
    InvalidInputError,
    KekRetiredError,
    KeyUnavailableError,
    MalformedIdError,
    NotFoundError,
    OblivioError,
    OperationalError,
    PayloadTooLargeError,
    WrongExpectedVersionError,
)
from eventstore.keys import EnvKeyProvider, KeyProvider, KeyringFile
from eventstore.model import (
    ANY,
    START,
    ChainBreak,
    Erasure,
    ExpectedVersion,
    KeyDestruction,
    LogCursor,
    LogPage,
    NewEvent,
    RecordedEvent,
    StreamHead,
    StreamRef,
    Subject,
    Tombstone,
    VerifyReport,
)
from eventstore.store import EventStore, Partition, ReadView
from eventstore.transaction import LockedStream, Transaction

__all__ = [
    "ANY",
    "DEFAULT_MAX_EVENT_BYTES",
    "START",
    "AuditEntry",
    "Backend",
    "ChainBreak",
    "ConflictError",
    "DuplicateEventError",
    "EnvKeyProvider",
    "Erasure",
    "EventErasedError",
    "EventStore",
    "EventUnavailableError",
    "ExpectedVersion",
    "IntegrityViolationError",
    "InvalidEncodingError",
    "InvalidInputError",
    "KekRetiredError",
    "KeyDestruction",
    "KeyProvider",
    "KeyUnavailableError",
    "KeyringFile",
    "LockedStream",
    "LogCursor",
    "LogPage",
    "MalformedIdError",
    "NewEvent",
    "NotFoundError",
    "OblivioError",
    "OperationalError",
    "Partition",
    "PayloadTooLargeError",
    "ReadView",
    "RecordedEvent",
    "StreamHead",
    "StreamRef",
    "Subject",
    "SubjectCipher",
    "Tombstone",
    "Transaction",
    "VerifyReport",
    "WrongExpectedVersionError",
    "create_backend",
]
