"""Validation of the identifiers callers hand to the log.

Everything that arrives from outside passes through one of these functions
before it reaches SQL, so malformed input fails early with a typed error and
nothing is written.
"""

from __future__ import annotations

import re
import uuid

from eventstore.errors import InvalidEncodingError, MalformedIdError

NAMESPACE_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")
EVENT_TYPE_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,99}")
MAX_SUBJECT_LENGTH = 256
# C0 control characters and DEL: one search, where a test of each character's
# ``ord`` in a generator ran Python code per character, twice a store.
_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f]")

# Namespaces starting with "$" are reserved for streams the system writes
# itself (the audit stream); callers can never name them.
SYSTEM_NAMESPACE = "$system"


def check_utf8(text: str, what: str) -> str:
    """Refuse strings that cannot be encoded as UTF-8 (lone surrogates)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidEncodingError(f"{what} is not valid UTF-8") from e
    return text


def parse_uuid(value: object, what: str = "id") -> uuid.UUID:
    """Return ``value`` as a UUID or raise :class:`MalformedIdError`."""
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        raise MalformedIdError(f"{what} must be a UUID string")
    try:
        return uuid.UUID(value)
    except ValueError as e:
        raise MalformedIdError(f"{what} is not a valid UUID: {value[:64]!r}") from e


def check_namespace(namespace: object, *, allow_system: bool = False) -> str:
    """Return a valid namespace or raise :class:`MalformedIdError`."""
    if allow_system and namespace == SYSTEM_NAMESPACE:
        return SYSTEM_NAMESPACE
    if not isinstance(namespace, str) or not NAMESPACE_PATTERN.fullmatch(namespace):
        raise MalformedIdError(
            "namespace must be 1-63 characters of a-z, 0-9, '_', '.', '-' "
            "starting with a letter or digit"
        )
    return namespace


def check_subject(subject: object) -> str:
    """Return a valid subject (user) id or raise :class:`MalformedIdError`."""
    if not isinstance(subject, str) or not subject.strip():
        raise MalformedIdError("user id must be a non-empty string")
    if len(subject) > MAX_SUBJECT_LENGTH:
        raise MalformedIdError(f"user id is longer than {MAX_SUBJECT_LENGTH} characters")
    if _CONTROL_CHARACTER.search(subject):
        raise MalformedIdError("user id contains control characters")
    return check_utf8(subject, "user id")


def check_event_type(event_type: object) -> str:
    """Return a valid event type name or raise :class:`MalformedIdError`."""
    if not isinstance(event_type, str) or not EVENT_TYPE_PATTERN.fullmatch(event_type):
        raise MalformedIdError(
            "event type must be 1-100 characters of letters, digits, '_', '.', ':', '-'"
        )
    return event_type
