"""``ingest``: store raw messages for claim extraction.

A message is stored exactly as ``store()`` stores a memory (one event, its
NOTE node, the same encryption and request-id idempotency), marked as
ingested and carrying its speaker declaration.  The claims come later, from
the extraction worker (``workers.extraction``), as one atomic append per
message; ``wait_for_extraction=True`` waits for that append (helping the
worker along) before returning.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventstore import RecordedEvent
from eventstore.errors import InvalidInputError
from oblivio.errors import NotCaughtUpError
from oblivio.memory import inputs
from oblivio.memory.commands import append_memories
from oblivio.memory.context import MemoryContext
from projections import events as ev
from projections.claims.publication import FIRST_PERSON_OWNER_KEY
from projections.model import NodeType, Role, Scope, SourceType
from projections.reads import GraphReads

MAX_BATCH_MESSAGES = 100
MAX_SPEAKER_CHARS = 200
#: The keys a per-message dictionary of ``ingest_batch`` may hold.
MESSAGE_KEYS = frozenset(
    {
        "message",
        "role",
        "scope",
        "source_type",
        "session_id",
        "occurred_at",
        "first_person_owner",
        "speaker",
        "enable_speaker_references",
        "meta",
        "request_id",
    }
)


@dataclass(frozen=True)
class IngestedMessage:
    """An ingested message: its event and NOTE node, and its claims once extracted."""

    event_id: uuid.UUID
    note_node_ids: tuple[uuid.UUID, ...]
    plan_event_id: uuid.UUID
    #: ``None`` until extraction ran (always set with ``wait_for_extraction``).
    claim_node_ids: tuple[uuid.UUID, ...] | None = None


def ingest(
    ctx: MemoryContext,
    message: str | bytes,
    *,
    user_id: str,
    role: Role | str = Role.USER,
    scope: Scope | str = Scope.PERSONAL,
    source_type: SourceType | str = SourceType.USER_STATED,
    session_id: str | None = None,
    occurred_at: datetime | str | None = None,
    first_person_owner: bool = False,
    speaker: str | None = None,
    enable_speaker_references: bool = False,
    meta: Mapping[str, Any] | None = None,
    wait_for_extraction: bool = False,
    request_id: uuid.UUID | str | None = None,
) -> IngestedMessage:
    """Store a raw message and have its claims extracted (asynchronously).

    ``first_person_owner=True`` declares that the message's singular "I",
    "me", "my", "mine" and "myself" are the memory owner (user role only, not
    with a named ``speaker``); ``speaker`` with ``enable_speaker_references``
    binds them to that named speaker instead.  ``occurred_at`` is when the
    message's statements took effect (default: when it is stored).
    """
    entry = {
        "message": message,
        "role": role,
        "scope": scope,
        "source_type": source_type,
        "session_id": session_id,
        "occurred_at": occurred_at,
        "first_person_owner": first_person_owner,
        "speaker": speaker,
        "enable_speaker_references": enable_speaker_references,
        "meta": meta,
        "request_id": request_id,
    }
    [result] = ingest_batch(ctx, [entry], user_id=user_id, wait_for_extraction=wait_for_extraction)
    return result


def ingest_batch(
    ctx: MemoryContext,
    messages: Sequence[Mapping[str, Any]],
    *,
    user_id: str,
    wait_for_extraction: bool = False,
) -> list[IngestedMessage]:
    """Ingest several messages of one owner atomically: all are stored, or none.

    Each message is a dictionary with ``message`` and, optionally, the other
    arguments of :func:`ingest` (``role``, ``first_person_owner``, …), which
    apply to that message alone.
    """
    user = inputs.user(user_id)
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidInputError("messages must be a list of message dictionaries")
    if not 1 <= len(messages) <= MAX_BATCH_MESSAGES:
        raise InvalidInputError(f"a batch holds 1 to {MAX_BATCH_MESSAGES} messages")
    parsed = [_parse(ctx, user, entry) for entry in messages]
    # Stored exactly as store() stores memories.
    recorded = [event for event, _ in append_memories(ctx, user, parsed)]
    results = [_result(ctx, event) for event in recorded]
    if not wait_for_extraction:
        return results
    return [
        _after_extraction(ctx, event, result)
        for event, result in zip(recorded, results, strict=True)
    ]


def _parse(
    ctx: MemoryContext, user: str, entry: Mapping[str, Any]
) -> tuple[dict[str, Any], uuid.UUID | None]:
    """The event data of one message, and its request id; nothing is written on error."""
    if not isinstance(entry, Mapping):
        raise InvalidInputError("each message must be a dictionary")
    unknown = set(entry) - MESSAGE_KEYS
    if unknown:
        raise InvalidInputError(f"unknown message fields: {', '.join(sorted(map(str, unknown)))}")
    role = inputs.choice(Role, entry.get("role", Role.USER), "role")
    owner = _flag(entry.get("first_person_owner", False), "first_person_owner")
    speaker = inputs.optional_text(entry.get("speaker"), "speaker", MAX_SPEAKER_CHARS)
    if owner and role is not Role.USER:
        raise InvalidInputError("first_person_owner requires the user role")
    if owner and speaker is not None:
        raise InvalidInputError("first_person_owner cannot be combined with a named speaker")
    references = _flag(entry.get("enable_speaker_references", False), "enable_speaker_references")
    if references and speaker is None:
        # Silently storing the message unbound would lose the caller's intent.
        raise InvalidInputError("enable_speaker_references requires a named speaker")
    # As store() does: the store's default metadata under the message's own; the
    # reserved key is refused in the latter (and cannot be in the former).
    meta = inputs.merged_meta(ctx.default_meta, entry.get("meta"))
    if owner:
        meta[FIRST_PERSON_OWNER_KEY] = True
    data = {
        "user_id": user,
        "content": inputs.content(entry.get("message")),
        "scope": inputs.choice(Scope, entry.get("scope", Scope.PERSONAL), "scope").value,
        "role": role.value,
        "session_id": inputs.optional_text(
            entry.get("session_id"), "session_id", inputs.MAX_SESSION_ID_CHARS
        ),
        "source_type": inputs.choice(
            SourceType, entry.get("source_type", SourceType.USER_STATED), "source_type"
        ).value,
        "node_type": NodeType.NOTE.value,
        "meta": meta,
        "ingest": {
            "speaker": speaker,
            "enable_speaker_references": references,
            "occurred_at": _occurred_at(entry.get("occurred_at")),
        },
    }
    return data, inputs.request_id(entry.get("request_id"))


def _flag(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInputError(f"{what} must be a boolean")
    return value


def _occurred_at(value: object) -> str | None:
    moment = inputs.optional_moment(value, "occurred_at")
    return None if moment is None else moment.isoformat()


def _result(ctx: MemoryContext, event: RecordedEvent) -> IngestedMessage:
    return IngestedMessage(
        event_id=event.event_id,
        note_node_ids=tuple(ctx.graph.node_ids(event)),
        plan_event_id=ev.plan_event_id(event.event_id),
    )


def _after_extraction(
    ctx: MemoryContext, event: RecordedEvent, result: IngestedMessage
) -> IngestedMessage:
    """Wait until the workers have appended (and the graph applied) the message's plan
    and the likely-update decision about it, if any."""
    for follower in (ctx.extraction, ctx.updates):
        if not follower.catch_up(event.cursor, event.stream.stream_id, ctx.consistency_timeout):
            raise NotCaughtUpError()
    with ctx.store.reading() as view:
        rows = GraphReads(view).nodes_of_event(event.event_id)
    notes = set(result.note_node_ids)
    claims = tuple(
        r.node_id for r in rows if r.node_id not in notes and r.node_type != NodeType.ENTITY
    )
    return IngestedMessage(result.event_id, result.note_node_ids, result.plan_event_id, claims)
