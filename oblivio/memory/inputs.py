"""Parsing what callers hand the memory operations, before anything is written."""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from eventstore.errors import InvalidEncodingError, InvalidInputError, MalformedIdError
from eventstore.ids import check_subject, check_utf8, parse_uuid
from oblivio.errors import EvidenceUnavailableError, NodeUnavailableError
from projections.claims.publication import FIRST_PERSON_OWNER_KEY
from projections.retrieval_index import MetaCondition, MetaPrefix

MAX_CONTENT_CHARS = 100_000
MAX_SESSION_ID_CHARS = 256
MAX_ACTOR_ID_CHARS = 256
#: The most memories one ``store_many`` call stores (one transaction).
MAX_BATCH_MEMORIES = 1000
#: The most rows one page of a listing (register, erasure requests, audit log) holds.
MAX_PAGE_SIZE = 200

E = TypeVar("E", bound=enum.Enum)


def content(value: object) -> str:
    """Memory text: non-empty UTF-8, bounded in size."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidEncodingError("content is not valid UTF-8") from e
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError("content must be a non-empty string")
    if len(value) > MAX_CONTENT_CHARS:
        raise InvalidInputError(f"content is longer than {MAX_CONTENT_CHARS} characters")
    return check_utf8(value, "content")


def choice(enum_type: type[E], value: object, what: str) -> E:
    """An enum member from a member or its value."""
    if isinstance(value, enum_type):
        return value
    try:
        return enum_type(value)
    except ValueError as e:
        allowed = ", ".join(str(m.value) for m in enum_type)
        raise InvalidInputError(f"{what} must be one of: {allowed}") from e


def optional_text(value: object, what: str, max_chars: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > max_chars:
        raise InvalidInputError(f"{what} must be a non-empty string of at most {max_chars} chars")
    return check_utf8(value, what)


def page_offset(page: int, per_page: int) -> int:
    """How many rows come before page ``page`` (from 1) of ``per_page`` rows each."""
    if page < 1 or not 1 <= per_page <= MAX_PAGE_SIZE:
        raise InvalidInputError(f"page must be 1 or more and per_page 1 to {MAX_PAGE_SIZE}")
    return (page - 1) * per_page


def meta(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """Caller metadata (e.g. source and confidence): a flat JSON object."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidInputError("meta must be an object with string keys")
    if FIRST_PERSON_OWNER_KEY in value:  # reserved: only ingest(first_person_owner=True) sets it
        raise InvalidInputError(
            f"meta must not set {FIRST_PERSON_OWNER_KEY!r}; pass first_person_owner instead"
        )
    for key, item in value.items():
        if not isinstance(item, str | int | float | bool) and item is not None:
            raise InvalidInputError(f"meta[{key!r}] must be a string, number, boolean or null")
        if isinstance(item, float) and not math.isfinite(item):
            raise InvalidInputError(f"meta[{key!r}] must be finite")
    confidence = value.get("confidence")
    if confidence is not None and (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0 <= confidence <= 1
    ):
        raise InvalidInputError("meta['confidence'] must be a number between 0 and 1")
    return dict(value)


def merged_meta(default: Mapping[str, Any], value: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{**default, **value}``, a new dict: the call's keys win, as the more specific source.

    ``default`` was checked with :func:`meta` when it was set; the result is a copy, so
    changing either dict after the call changes nothing that was stored.
    """
    return {**default, **meta(value)}


def user(value: object) -> str:
    return check_subject(value)


def node_id(value: object) -> uuid.UUID:
    """A node id; malformed ids are simply unavailable nodes."""
    try:
        return parse_uuid(value, "node id")
    except MalformedIdError as e:
        raise NodeUnavailableError() from e


def evidence_id(value: object) -> uuid.UUID | None:
    """Evidence is optional; a malformed reference is unavailable evidence."""
    if value is None:
        return None
    try:
        return parse_uuid(value, "evidence id")
    except MalformedIdError as e:
        raise EvidenceUnavailableError() from e


def request_id(value: object) -> uuid.UUID | None:
    """Idempotency keys must be UUIDs."""
    return None if value is None else parse_uuid(value, "request id")


def bounded(value: object, what: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{what} must be a number")
    if not low <= value <= high:
        raise InvalidInputError(f"{what} must be between {low:g} and {high:g}")
    return float(value)


def moment(value: object, what: str) -> datetime:
    """A timezone-aware point in time (a datetime, or ISO 8601 text), in UTC.

    Naive datetimes are refused: a wall-clock time without a zone names no
    instant, and guessing one would move memories in time.
    """
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as e:
            raise InvalidInputError(f"{what} must be an ISO 8601 date and time") from e
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInputError(f"{what} must be a timezone-aware date and time")
    return value.astimezone(UTC)


def optional_moment(value: object, what: str) -> datetime | None:
    return None if value is None else moment(value, what)


#: The one operator a ``meta`` filter value may be instead of a JSON scalar.
PREFIX_OPERATOR = "$prefix"


def meta_filter(value: object) -> dict[str, MetaCondition] | None:
    """A ``meta`` filter: top-level metadata keys, each with the JSON scalar it must
    equal or ``{"$prefix": text}`` (a string value starting with ``text``)."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidInputError("the meta filter must be an object with string keys")
    return {key: _meta_condition(key, item) for key, item in value.items()}


def _meta_condition(key: str, item: object) -> MetaCondition:
    if isinstance(item, MetaPrefix):
        return item
    if isinstance(item, Mapping):
        text = item.get(PREFIX_OPERATOR)
        if len(item) != 1 or not isinstance(text, str):
            raise InvalidInputError(
                f'the meta filter\'s {key!r} must be a JSON scalar or {{"$prefix": "text"}}'
            )
        return MetaPrefix(text)
    if not isinstance(item, str | int | float | bool) and item is not None:
        raise InvalidInputError(
            f"the meta filter's {key!r} must be a string, number, boolean, null "
            'or {"$prefix": "text"}'
        )
    if isinstance(item, float) and not math.isfinite(item):
        raise InvalidInputError(f"the meta filter's {key!r} must be finite")
    return item


def meta_filter_json(wanted: Mapping[str, MetaCondition]) -> dict[str, Any]:
    """A checked ``meta`` filter as JSON again (what travels over HTTP)."""
    return {
        key: {PREFIX_OPERATOR: c.text} if isinstance(c, MetaPrefix) else c
        for key, c in wanted.items()
    }


@dataclass(frozen=True)
class TimeFilter:
    """The time parts of a query: a moment (``as_of``) and an effective-time window."""

    as_of: datetime | None = None
    occurred_since: datetime | None = None
    occurred_until: datetime | None = None


def time_filter(as_of: object, occurred_since: object, occurred_until: object) -> TimeFilter:
    """Checked times of a query: timezone-aware, and a window that is not empty."""
    since = optional_moment(occurred_since, "occurred_since")
    until = optional_moment(occurred_until, "occurred_until")
    if since is not None and until is not None and since >= until:
        raise InvalidInputError("occurred_since must be before occurred_until")
    return TimeFilter(optional_moment(as_of, "as_of"), since, until)
