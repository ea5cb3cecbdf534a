"""SQL of keyed items (see ``memory_items`` in projections.storage.tables)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator
from datetime import datetime
from itertools import groupby
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from projections.storage.tables import items

ItemRow = sa.Row[Any]

#: An item's revisions in the order their values took effect; the last is current.
_EFFECTIVE_ORDER = (items.c.occurred_at, items.c.version)
# Built once: every get, put and delete of an item runs it.
_revisions = (
    sa.select(items)
    .where(items.c.stream_id == sa.bindparam("stream_id"), items.c.item == sa.bindparam("item"))
    .order_by(*_EFFECTIVE_ORDER)
)


class ItemStore:
    """Reads and writes the item rows on one connection."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def revisions(self, stream_id: int, item: bytes) -> list[ItemRow]:
        """The readable revisions of one item (a range of the primary key), in the order
        their values took effect: the last is the current one."""
        return list(self.conn.execute(_revisions, {"stream_id": stream_id, "item": item}))

    def item_of(self, stream_id: int, event_id: uuid.UUID) -> bytes | None:
        """The keyed hash of the item ``event_id`` is a revision of, if it is one."""
        query = sa.select(items.c.item).where(
            items.c.stream_id == stream_id, items.c.event_id == event_id
        )
        return self.conn.execute(query).scalar_one_or_none()

    def stream_items(
        self, stream_id: int, wanted: Collection[bytes] | None = None
    ) -> Iterator[list[ItemRow]]:
        """Every item of a stream (or those of the ``wanted`` keyed hashes: one range of
        the primary key each), as its revisions (in effective order, see
        :meth:`revisions`), in item order."""
        query = (
            sa.select(items)
            .where(items.c.stream_id == stream_id)
            .order_by(items.c.item, *_EFFECTIVE_ORDER)
        )
        if wanted is not None:
            query = query.where(items.c.item.in_(list(wanted)))
        for _, rows in groupby(self.conn.execute(query), key=lambda r: r.item):
            yield list(rows)

    def move_expiry(self, stream_id: int, event_id: uuid.UUID, expires_at: datetime | None) -> None:
        """Set a revision's expiry; a revision erased meanwhile has no row to touch."""
        self.conn.execute(
            items.update()
            .where(items.c.stream_id == stream_id, items.c.event_id == event_id)
            .values(expires_at=expires_at)
        )

    def purge_stream(self, stream_id: int) -> None:
        self.conn.execute(items.delete().where(items.c.stream_id == stream_id))

    def purge_events(self, stream_id: int, event_ids: Collection[uuid.UUID]) -> None:
        """The rows of these revisions (the events delete_event re-derives)."""
        self.conn.execute(
            items.delete().where(items.c.stream_id == stream_id, items.c.event_id.in_(event_ids))
        )

    def stream_rows(
        self, stream_id: int, event_ids: Collection[uuid.UUID] | None = None
    ) -> list[dict[str, Any]]:
        """A stream's rows (of these revisions only, if given) as plain values, for its
        state digest."""
        query = (
            sa.select(items)
            .where(items.c.stream_id == stream_id)
            .order_by(items.c.item, items.c.version)
        )
        if event_ids is not None:
            query = query.where(items.c.event_id.in_(list(event_ids)))
        return [dict(row._mapping) for row in self.conn.execute(query)]


def revision_row(
    stream_id: int,
    item: bytes,
    version: int,
    event_id: uuid.UUID,
    recorded_at: datetime,
    expires_at: datetime | None,
    occurred_at: datetime,
) -> dict[str, Any]:
    """The ``memory_items`` row of one revision of an item (its keyed hash ``item``),
    written with the stored event it is (see NodeGraphProjection.stored_rows)."""
    return {
        "stream_id": stream_id,
        "item": item,
        "version": version,
        "event_id": event_id,
        "recorded_at": recorded_at,
        "expires_at": expires_at,
        "occurred_at": occurred_at,
    }
