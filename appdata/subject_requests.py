"""SQL of the data-protection officer's desk beside the log: legal holds (GDPR
Art. 17(3)) and the register of data-subject requests of every kind.

Content-free: subjects by keyed hash, actors by keyed hash, grounds from fixed
vocabularies (``eventstore.subject_rights``), references as identifiers.  An
erasure's progress stays in the log's ``erasure_requests``; the register reads
its status from there, so the two never disagree.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from appdata.tables import legal_holds, subject_requests
from eventstore.schema import erasure_requests

Row = sa.Row[Any]


# -- legal holds ------------------------------------------------------------------------


def active_hold(conn: Connection, namespace: str, subject_key: bytes) -> Row | None:
    """The subject's hold in place now, if any."""
    table = legal_holds.c
    return conn.execute(
        sa.select(legal_holds)
        .where(
            table.namespace == namespace,
            table.subject_key == subject_key,
            table.lifted_at.is_(None),
        )
        .order_by(table.placed_at.desc())
        .limit(1)
    ).first()


def held_keys(conn: Connection, namespace: str | None) -> set[bytes]:
    """Subject keys under a hold now (of ``namespace``; of all for None)."""
    table = legal_holds.c
    query = sa.select(table.subject_key).where(table.lifted_at.is_(None))
    if namespace is not None:
        query = query.where(table.namespace == namespace)
    return {bytes(k) for k in conn.execute(query).scalars()}


def place_hold(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(sa.insert(legal_holds).values(**values))


def lift_hold(conn: Connection, hold_id: uuid.UUID, now: datetime, actor: str | None) -> None:
    conn.execute(
        sa.update(legal_holds)
        .where(legal_holds.c.hold_id == hold_id)
        .values(lifted_at=now, lifted_by=actor)
    )


# -- the register -----------------------------------------------------------------------


def register(conn: Connection, values: dict[str, Any]) -> None:
    conn.execute(sa.insert(subject_requests).values(**values))


def finish(
    conn: Connection, request_id: uuid.UUID, status: str, outcome: str, now: datetime
) -> None:
    conn.execute(
        sa.update(subject_requests)
        .where(subject_requests.c.request_id == request_id)
        .values(status=status, outcome=outcome, completed_at=now)
    )


def extend(conn: Connection, request_id: uuid.UUID, until: datetime, reason: str) -> int:
    done = conn.execute(
        sa.update(subject_requests)
        .where(subject_requests.c.request_id == request_id)
        .values(extended_deadline_at=until, extension_reason=reason)
    )
    return int(done.rowcount)


@dataclass(frozen=True)
class RegisterFilter:
    """Which register rows a list shows; ``None`` fields do not filter."""

    namespace: str | None  # None: every namespace (cluster-wide callers)
    subject_key: bytes | None = None
    request_id: uuid.UUID | None = None
    kind: str | None = None
    status: str | None = None
    reference: str | None = None
    overdue_at: datetime | None = None  # only requests open past a deadline at this time


#: A register row's status: an erasure's comes from its erasure request while it
#: runs (``rebuilding`` … ``completed``), so the register never disagrees with it.
_erasure = erasure_requests.c
_STATUS = sa.case(
    (
        sa.and_(subject_requests.c.status == "open", _erasure.status.is_not(None)),
        sa.case(
            (_erasure.status == "completed", "completed"),
            (_erasure.status == "failed", "failed"),
            else_="open",
        ),
    ),
    else_=subject_requests.c.status,
).label("current_status")
_COMPLETED = sa.func.coalesce(subject_requests.c.completed_at, _erasure.completed_at).label(
    "finished_at"
)
_REGISTER = sa.select(
    subject_requests,
    _STATUS,
    _COMPLETED,
    _erasure.status.label("erasure_status"),
    _erasure.certificate_id,
).select_from(
    subject_requests.outerjoin(
        erasure_requests, erasure_requests.c.request_id == subject_requests.c.erasure_request_id
    )
)


def _register_where(wanted: RegisterFilter) -> list[sa.ColumnElement[bool]]:
    table = subject_requests.c
    conditions: list[sa.ColumnElement[bool]] = []
    if wanted.namespace is not None:
        conditions.append(table.namespace == wanted.namespace)
    equal: list[tuple[sa.Column[Any], object]] = [
        (table.subject_key, wanted.subject_key),
        (table.request_id, wanted.request_id),
        (table.kind, wanted.kind),
        (table.reference, wanted.reference),
    ]
    conditions.extend(column == value for column, value in equal if value is not None)
    if wanted.status is not None:
        conditions.append(_STATUS.in_([wanted.status]))
    if wanted.overdue_at is not None:
        deadline = sa.func.coalesce(table.extended_deadline_at, table.legal_deadline_at)
        conditions.append(
            sa.or_(
                table.overdue_at.is_not(None),
                sa.and_(
                    _STATUS == "open",
                    sa.or_(
                        table.operational_deadline_at < wanted.overdue_at,
                        deadline < wanted.overdue_at,
                    ),
                ),
            )
        )
    return conditions


def list_register(
    conn: Connection, wanted: RegisterFilter, limit: int | None, offset: int = 0
) -> tuple[list[Row], int]:
    """Register rows, newest first (all of them for ``limit`` None), and how many match."""
    conditions = _register_where(wanted)
    total = conn.execute(
        sa.select(sa.func.count()).select_from(_REGISTER.where(*conditions).subquery())
    ).scalar_one()
    query = (
        _REGISTER.where(*conditions)
        .order_by(subject_requests.c.received_at.desc(), subject_requests.c.request_id)
        .offset(offset)
    )
    if limit is not None:
        query = query.limit(limit)
    return list(conn.execute(query)), int(total)


def overdue_unflagged(conn: Connection, now: datetime) -> list[Row]:
    """Open register rows of kinds other than erasure (erasures have their own
    watchdog) past their operational deadline and not yet flagged."""
    table = subject_requests.c
    return list(
        conn.execute(
            sa.select(subject_requests).where(
                table.kind != "erasure",
                table.status == "open",
                table.overdue_at.is_(None),
                table.operational_deadline_at < now,
            )
        )
    )


def flag_overdue(conn: Connection, request_id: uuid.UUID, now: datetime) -> None:
    conn.execute(
        sa.update(subject_requests)
        .where(subject_requests.c.request_id == request_id)
        .values(overdue_at=now)
    )
