"""The audit index: one row per audit entry, with the content-free fields the
audit page filters on (namespace, action, subject and actor references, time).

The audit stream stays the record; this table only finds entries in it, so a
page of the newest entries (of one subject, one actor, one action, a time
range) reads that page and never the whole stream.  A row is written in the
transaction that appends its entry (``Transaction.append_audit``); entries
written before the table existed are indexed from the stream when first needed
(``missing_versions``), by the same insert.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from eventstore.model import RecordedEvent
from eventstore.schema import audit_index

#: ``AuditQuery.namespace`` for every namespace's entries and the store's own.
EVERY_NAMESPACE = None


@dataclass(frozen=True)
class AuditQuery:
    """Which audit entries a page shows; ``None`` fields do not filter.

    ``namespace`` is the caller's tenant (``EVERY_NAMESPACE`` for a cluster-wide
    caller); the others are the page's filters.  Times are ``[since, until)``.
    """

    namespace: str | None = EVERY_NAMESPACE
    action: str | None = None
    subject_ref: str | None = None
    actor_ref: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    @property
    def filters(self) -> dict[str, str]:
        """The filters beyond the namespace, as an export's manifest names them."""
        named = {
            "action": self.action,
            "subject_ref": self.subject_ref,
            "actor_ref": self.actor_ref,
        }
        return {k: v for k, v in named.items() if v is not None}

    def matches(self, event: RecordedEvent) -> bool:
        """Whether an entry read from the stream is one this query selects."""
        return _matches(self, index_values(event), event.recorded_at)


def _matches(query: AuditQuery, row: dict[str, Any], recorded_at: datetime) -> bool:
    if query.namespace is not EVERY_NAMESPACE and row["namespace"] != query.namespace:
        return False
    if any(row[name] != wanted for name, wanted in query.filters.items()):
        return False
    return (query.since is None or recorded_at >= query.since) and (
        query.until is None or recorded_at < query.until
    )


def index_values(event: RecordedEvent) -> dict[str, Any]:
    """The index row of an audit entry."""
    data = event.data or {}
    return {
        "version": event.version,
        "event_id": event.event_id,
        "recorded_at": event.recorded_at,
        "namespace": data.get("namespace"),
        "action": str(data.get("action", event.type)),
        "subject_ref": data.get("subject_ref"),
        "actor_ref": data.get("actor_ref"),
    }


def record(conn: Connection, insert: Insert, entries: list[RecordedEvent]) -> None:
    """Index ``entries`` (``insert``: the backend's insert-unless-present into the
    index, so two readers indexing old entries at once do not collide)."""
    if entries:
        conn.execute(insert, [index_values(e) for e in entries])


def missing_versions(conn: Connection, head_version: int) -> list[tuple[int, int]]:
    """The ranges of audit versions up to ``head_version`` not indexed yet.

    Rows are written with their entries, so only two runs can be missing: the
    entries before the table existed, and (after a failed catch-up) the ones
    since the last indexed; both ends are read from the primary key.
    """
    first, last = conn.execute(
        sa.select(sa.func.min(audit_index.c.version), sa.func.max(audit_index.c.version))
    ).one()
    if first is None:
        return [(1, head_version)] if head_version else []
    runs = []
    if first > 1:
        runs.append((1, first - 1))
    if last < head_version:
        runs.append((last + 1, head_version))
    return runs


def _where(query: AuditQuery) -> list[sa.ColumnElement[bool]]:
    columns = audit_index.c
    conditions: list[sa.ColumnElement[bool]] = []
    if query.namespace is not EVERY_NAMESPACE:
        conditions.append(columns.namespace == query.namespace)
    for name, wanted in query.filters.items():
        conditions.append(columns[name] == wanted)
    if query.since is not None:
        conditions.append(columns.recorded_at >= query.since)
    if query.until is not None:
        conditions.append(columns.recorded_at < query.until)
    return conditions


def page(
    conn: Connection, query: AuditQuery, limit: int, offset: int
) -> tuple[list[uuid.UUID], int]:
    """Event ids of one page of matching entries, newest first, and how many match."""
    conditions = _where(query)
    total = conn.execute(
        sa.select(sa.func.count()).select_from(audit_index).where(*conditions)
    ).scalar_one()
    ids = conn.execute(
        sa.select(audit_index.c.event_id)
        .where(*conditions)
        .order_by(audit_index.c.version.desc())
        .limit(limit)
        .offset(offset)
    ).scalars()
    return [uuid.UUID(str(i)) for i in ids], int(total)
