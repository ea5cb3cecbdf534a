"""Keyed items: memories a caller names by a key of its own, one current revision each.

``put_item`` stores a revision of an item (a memory.stored event whose
payload names the item) and, in the same transaction and under the owner's
stream lock, supersedes the previous revision's nodes with the new one's, so
two writers of one key (in two processes) always leave one current revision.
Revisions are ordered by when their values took effect (``occurred_at``): one
stored with an earlier effective time than the current revision's goes into
the item's history in its place (``commands.backdated_locked``).
The projection keeps the revisions in ``memory_items`` under a keyed hash of
the item key (see projections.storage.tables), so that ``get_item`` finds an
item by index: its cost does not grow with the owner's stream.  Erasing a
revision (``delete_event``, ``forget``) removes its row with the rest of the
node graph; replaying the log rebuilds the rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from eventstore import (
    LockedStream,
    NewEvent,
    ReadView,
    RecordedEvent,
    Subject,
    Transaction,
)
from eventstore.errors import InvalidInputError
from oblivio.errors import ItemScopeConflictError
from oblivio.memory import commands, inputs
from oblivio.memory.backfills import backfill_locked
from oblivio.memory.context import MemoryContext
from oblivio.memory.queries import is_memory_event, memory_event, owner_stream
from oblivio.memory.records import ItemRevision, StoredItem
from projections import events as ev
from projections.graph import item_hash
from projections.model import LifecycleState, NodeType, Role, Scope, SourceType
from projections.reads import GraphReads, ItemRow

MAX_ITEM_KEY_CHARS = 256
#: ``get_events`` reads at most this many events by id at once.
EVENT_BATCH = 500
#: Keys one ``list_items(keys=...)`` call may name.
MAX_LISTED_KEYS = 1000


def item_key(value: object) -> str:
    key = inputs.optional_text(value, "item key", MAX_ITEM_KEY_CHARS)
    if key is None:
        raise InvalidInputError("an item key is required")
    return key


def _expiry(value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInputError("expires_at must be a timezone-aware datetime or None")
    return value


def put_item(
    ctx: MemoryContext,
    key: str,
    content: str | bytes,
    *,
    user_id: str,
    scope: Scope | str = Scope.PERSONAL,
    source_type: SourceType | str = SourceType.USER_STATED,
    node_type: NodeType | str = NodeType.FACT,
    meta: Mapping[str, Any] | None = None,
    expires_at: datetime | None = None,
    occurred_at: datetime | str | None = None,
) -> ItemRevision:
    """Store a new revision of the item ``key``; it supersedes the current revision.

    The new revision must have the item's scope (a correction stays within
    one owner and scope): another scope raises ``ItemScopeConflictError`` and
    writes nothing.  ``expires_at`` is the revision's retention time, if any;
    ``occurred_at`` when its value took effect (default: when it is stored): the
    revision it replaces held until then (never less than from its own time).  A
    revision that took effect before the current one is history: it holds until
    the revision after it in effect took effect, and the current one stays.
    """
    user = inputs.user(user_id)
    data = commands.stored_data(
        ctx,
        content,
        user=user,
        scope=scope,
        role=Role.USER,
        session_id=None,
        source_type=source_type,
        node_type=node_type,
        meta=meta,
        occurred_at=occurred_at,
    )
    wanted, until = item_key(key), _expiry(expires_at)
    data["item"] = {"key": wanted, "expires_at": None if until is None else until.isoformat()}
    with ctx.store.transaction() as tx:
        stream = tx.lock_stream(Subject(ctx.namespace, user), create=True)
        cipher = tx.locked_cipher(stream)
        backfill_locked(ctx, tx, cipher)
        graph = GraphReads(tx)
        revisions = graph.item_revisions(cipher.stream_id, item_hash(cipher, wanted))
        current = graph.nodes_of_event(revisions[-1].event_id) if revisions else []
        if any(row.scope != data["scope"] for row in current):
            raise ItemScopeConflictError(
                f"item exists in scope {current[0].scope!r}, not {data['scope']!r}: "
                "delete it before storing it in another scope"
            )
        [recorded] = tx.append_locked(stream, [NewEvent(ev.STORED, data)])
        [node_ids] = ctx.graph.apply_stored(tx.connection, cipher, [recorded])
        effective = ev.effective_at(data, recorded.recorded_at)
        later = [r for r in revisions if r.occurred_at > effective]
        if later:  # a value of the item's history: the current one stays
            _into_history(ctx, tx, stream, node_ids[0], revisions, later[0])
        else:
            for row in current:
                if row.lifecycle != LifecycleState.SUPERSEDED:
                    commands.supersede_locked(ctx, tx, row.node_id, node_ids[0], None, user, None)
    replaced = tuple(r.event_id for r in revisions)
    return ItemRevision(recorded.event_id, tuple(node_ids), replaced)


def _into_history(
    ctx: MemoryContext,
    tx: Transaction,
    stream: LockedStream,
    node_id: uuid.UUID,
    revisions: Sequence[ItemRow],
    successor: ItemRow,
) -> None:
    """A revision that took effect before ``successor`` (the first revision effective
    after it) holds until then, and the revision before it in effect until it took
    effect: the history storing the values in effective order gives."""
    graph = GraphReads(tx)
    [first, *_] = graph.nodes_of_event(successor.event_id)
    place = revisions.index(successor)
    before = graph.nodes_of_event(revisions[place - 1].event_id) if place else []
    commands.backdated_locked(ctx, tx, stream, node_id, first.node_id, [r.node_id for r in before])


def set_item_expiry(
    ctx: MemoryContext, key: str, expires_at: datetime | None, *, user_id: str
) -> bool:
    """Move the current revision's retention time (a TTL refreshed on read); False
    when there is no such item."""
    return bool(set_item_expiries(ctx, {key: expires_at}, user_id=user_id))


def set_item_expiries(
    ctx: MemoryContext, expiries: Mapping[str, datetime | None], *, user_id: str
) -> set[str]:
    """Move the retention times of several items in one transaction (a search that
    refreshes the TTLs of its page); the keys that name an item."""
    user = inputs.user(user_id)
    if not isinstance(expiries, Mapping):
        raise InvalidInputError("expiries must map item keys to datetimes or None")
    wanted = {item_key(key): _expiry(until) for key, until in expiries.items()}
    found: set[str] = set()
    with ctx.store.transaction() as tx:
        stream = tx.lock_stream(Subject(ctx.namespace, user))
        if stream is None or stream.closed_at is not None:
            return found
        cipher = tx.locked_cipher(stream)
        backfill_locked(ctx, tx, cipher)
        graph = GraphReads(tx)
        for key, until in wanted.items():
            revisions = graph.item_revisions(cipher.stream_id, item_hash(cipher, key))
            if not revisions:
                continue
            data = {
                "event_id": str(revisions[-1].event_id),
                "expires_at": None if until is None else until.isoformat(),
            }
            commands.append_projected(ctx, tx, stream, NewEvent(ev.ITEM_EXPIRY, data))
            found.add(key)
    return found


def get_item(ctx: MemoryContext, key: str, *, user_id: str) -> StoredItem | None:
    """The item ``key`` of ``user_id`` (its current revision), or ``None``."""
    wanted = item_key(key)
    found = _items(ctx, user_id, lambda view, stream_id: _one(view, stream_id, wanted))
    return found[0] if found else None


def list_items(
    ctx: MemoryContext, *, user_id: str, keys: Sequence[str] | None = None
) -> list[StoredItem]:
    """Every item of ``user_id``, its cost growing with the number of items (a listing);
    with ``keys`` (1 to 1,000), only the items among them, each found by index (the
    cost grows with the keys, not with the person's other items)."""
    if keys is None:
        return _items(ctx, user_id, _all)
    wanted = _item_keys(keys)
    return _items(ctx, user_id, lambda view, stream_id: _some(view, stream_id, wanted))


def _item_keys(keys: object) -> list[str]:
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence):
        raise InvalidInputError("keys must be a list of item keys")
    if not 1 <= len(keys) <= MAX_LISTED_KEYS:
        raise InvalidInputError(f"keys must name 1 to {MAX_LISTED_KEYS} item keys")
    return list(dict.fromkeys(item_key(k) for k in keys))


def _all(view: ReadView, stream_id: int) -> Iterable[list[ItemRow]]:
    return GraphReads(view).stream_items(stream_id)


def _one(view: ReadView, stream_id: int, key: str) -> list[list[ItemRow]]:
    cipher = view.cipher(stream_id)
    if cipher is None:
        return []
    revisions = GraphReads(view).item_revisions(stream_id, item_hash(cipher, key))
    return [revisions] if revisions else []


def _some(view: ReadView, stream_id: int, keys: Sequence[str]) -> list[list[ItemRow]]:
    cipher = view.cipher(stream_id)
    if cipher is None:
        return []
    return list(GraphReads(view).stream_items(stream_id, [item_hash(cipher, k) for k in keys]))


Select = Callable[[ReadView, int], Iterable[list[ItemRow]]]


def _items(ctx: MemoryContext, user_id: str, select: Select) -> list[StoredItem]:
    """The items ``select`` picks from the owner's rows, each with its current event."""
    user = inputs.user(user_id)
    owner = owner_stream(ctx, user)
    if owner is None or owner < 0:
        return []
    with ctx.store.reading() as view:
        pending = ctx.graph.needs_rebuild(view.connection, owner)
    if pending:
        _backfill(ctx, user)
    with ctx.store.reading() as view:
        groups: Sequence[list[ItemRow]] = list(select(view, owner))
    found: list[StoredItem] = []
    for start in range(0, len(groups), EVENT_BATCH):
        batch = groups[start : start + EVENT_BATCH]
        events = {e.event_id: e for e in ctx.store.get_events([g[-1].event_id for g in batch])}
        for revisions in batch:
            event = events.get(revisions[-1].event_id)
            if event is not None and is_memory_event(ctx, event) and event.data:
                found.append(_stored_item(event, revisions))
    return found


def _backfill(ctx: MemoryContext, user: str) -> None:
    """Rebuild the graph of a stream an upgrade marked, in a write transaction."""
    with ctx.store.transaction() as tx:
        stream = tx.lock_stream(Subject(ctx.namespace, user))
        if stream is not None and stream.closed_at is None:
            backfill_locked(ctx, tx, tx.locked_cipher(stream))


def _stored_item(event: RecordedEvent, revisions: list[ItemRow]) -> StoredItem:
    item = ev.item_of(event.data or {})
    assert item is not None  # the rows name only events that revise an item
    return StoredItem(
        key=item[0],
        current=memory_event(event),
        revision_ids=tuple(r.event_id for r in revisions),
        created_at=min(r.recorded_at for r in revisions),
        expires_at=revisions[-1].expires_at,
    )
