"""Importing a history of memories: a JSON Lines file, or a subject export of oblivio's.

Every memory is read and validated before the first one is written: a file
with one bad line writes nothing, and the error names the line.  Then each
person's memories are stored in their order, in chunks, each chunk one
``store_many`` call (one transaction under the person's lock, the same path
as ``store()``).  A chunk that fails (a restricted person, a reused request
id) stops the import; the chunks before it stay stored, and a memory that
carries a ``request_id`` is stored once however often the file is imported.

A line of JSON Lines is one memory: ``user_id`` and ``content``, and
optionally the options of ``store()``.  A subject export (``oblivio export
subject``) brings back the person's stored memories with their effective
times, each keyed by its exported event id, so importing it twice stores it
once (docs/operations.md).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventstore.errors import InvalidInputError
from oblivio.memory import commands, inputs
from oblivio.memory.compliance import SUBJECT_EXPORT_FORMAT
from oblivio.memory.context import MemoryContext
from projections import events as ev
from projections.claims.publication import FIRST_PERSON_OWNER_KEY

#: Memories per ``store_many`` call (one transaction) unless told otherwise.
DEFAULT_CHUNK = 500
#: What a line may hold: the owner, and a memory of ``store_many``.
LINE_KEYS = commands.MEMORY_KEYS | {"user_id"}
# The options of a stored memory an export carries in its event data.
_EXPORTED = ("content", "scope", "role", "session_id", "source_type", "node_type", "meta")


@dataclass(frozen=True)
class ImportReport:
    memories: int
    users: int
    chunks: int


Memory = tuple[str, dict[str, Any]]  # the owner, and the memory as store_many takes it


def import_file(
    ctx: MemoryContext,
    path: Path,
    *,
    user_id: str | None = None,
    chunk: int = DEFAULT_CHUNK,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Store every memory of the file at ``path`` (see the module docstring).

    ``user_id`` stores a subject export's memories for that user (default: the
    user it was exported for); JSON Lines name their owner on each line.
    ``progress`` is told how many memories each chunk stored.
    """
    if not 1 <= chunk <= inputs.MAX_BATCH_MEMORIES:
        raise InvalidInputError(f"a chunk holds 1 to {inputs.MAX_BATCH_MEMORIES} memories")
    memories = list(read_memories(ctx, path, user_id))
    by_user: dict[str, list[dict[str, Any]]] = {}
    for user, memory in memories:
        by_user.setdefault(user, []).append(memory)
    chunks = 0
    for user, own in by_user.items():
        for start in range(0, len(own), chunk):
            part = own[start : start + chunk]
            commands.store_many(ctx, part, user_id=user)
            chunks += 1
            if progress is not None:
                progress(len(part))
    return ImportReport(len(memories), len(by_user), chunks)


def read_memories(ctx: MemoryContext, path: Path, user_id: str | None = None) -> Iterator[Memory]:
    """The file's memories, each validated as ``store_many`` validates it."""
    with path.open(encoding="utf-8") as lines:
        first = lines.readline()
        export = _subject_export(first, lines)
    if export is not None:
        found: Iterable[tuple[int, Memory]] = _exported(export, user_id)
    else:
        if user_id is not None:
            raise InvalidInputError("JSON Lines name their user on each line: no user_id")
        found = _lines(path)
    for where, (user, memory) in found:
        try:
            checked = inputs.user(user)
            commands.check_memory(ctx, checked, memory)
        except InvalidInputError as e:
            raise type(e)(f"{path.name}:{where}: {e}") from e
        yield checked, memory


def _subject_export(first: str, rest: Iterable[str]) -> dict[str, Any] | None:
    """The whole file as a subject export, or ``None`` when it is JSON Lines (its first
    line is a memory of its own)."""
    try:
        line = json.loads(first)
    except json.JSONDecodeError:
        line = None
    if isinstance(line, dict) and "format" not in line:
        return None
    try:
        whole = json.loads(first + "".join(rest))
    except json.JSONDecodeError as e:
        raise InvalidInputError(f"neither JSON Lines nor a subject export: {e}") from e
    if not isinstance(whole, dict) or whole.get("format") != SUBJECT_EXPORT_FORMAT:
        raise InvalidInputError(f"a JSON file to import must be a {SUBJECT_EXPORT_FORMAT} export")
    return whole


def _lines(path: Path) -> Iterator[tuple[int, Memory]]:
    with path.open(encoding="utf-8") as lines:
        for number, text in enumerate(lines, start=1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as e:
                raise InvalidInputError(f"line {number} is not JSON: {e}") from e
            if not isinstance(line, dict):
                raise InvalidInputError(f"line {number} is not a JSON object")
            unknown = set(line) - LINE_KEYS
            if unknown:
                fields = ", ".join(sorted(unknown))
                raise InvalidInputError(f"line {number}: unknown fields: {fields}")
            memory = {k: v for k, v in line.items() if k != "user_id"}
            yield number, (line.get("user_id"), memory)  # type: ignore[misc]  # checked later


def _exported(export: Mapping[str, Any], user_id: str | None) -> Iterator[tuple[int, Memory]]:
    """The stored memories of a subject export (keyed items and other events are not
    memories to store again), keyed by their exported event ids."""
    events = export.get("events")
    if not isinstance(events, list):
        raise InvalidInputError("the subject export holds no events")
    for number, event in enumerate(events, start=1):
        if not isinstance(event, dict) or event.get("type") != ev.STORED:
            continue
        data = event.get("data")
        if not isinstance(data, dict) or "item" in data:
            continue
        memory = {k: data[k] for k in _EXPORTED if data.get(k) is not None}
        if isinstance(memory.get("meta"), dict):  # an ingest declaration is not a store's
            memory["meta"] = {
                k: v for k, v in memory["meta"].items() if k != FIRST_PERSON_OWNER_KEY
            }
        memory["occurred_at"] = data.get("occurred_at") or event.get("recorded_at")
        memory["request_id"] = _request_id(event.get("event_id"))
        owner = user_id if user_id is not None else data.get("user_id")
        yield number, (owner, memory)  # type: ignore[misc]  # checked later


def _request_id(event_id: object) -> uuid.UUID:
    try:
        return uuid.UUID(str(event_id))
    except ValueError as e:
        raise InvalidInputError("an exported event has a malformed event_id") from e
