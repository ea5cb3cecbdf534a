"""SQL of the data-protection officer's desk: restrictions of processing (Art. 18),
legal holds (Art. 17(3)) and the register of data-subject requests.

Content-free like the erasure bookkeeping: subjects by keyed hash, actors by
keyed hash, grounds from fixed vocabularies, references as identifiers.

``is_restricted`` is the one predicate every automated path asks (retrieval,
claim extraction, archiving, likely updates) before it touches a subject: it is
one primary-key lookup, cheap enough to ask under the stream lock.
"""

from __future__ import annotations

import contextvars
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.errors import InvalidInputError
from eventstore.schema import erasure_requests, legal_holds, subject_requests, subject_restrictions

Row = sa.Row[Any]

#: A request's reference: a ticket or letter id, never prose.
REFERENCE = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")

#: Why processing is restricted: GDPR Art. 18(1)(a)–(d).
RESTRICTION_GROUNDS = {
    "art18-1-a": "accuracy contested, while it is verified",
    "art18-1-b": "unlawful processing, restriction asked for instead of erasure",
    "art18-1-c": "no longer needed, but the subject needs it for legal claims",
    "art18-1-d": "objection pending (Art. 21(1))",
}
#: Why erasure is held: GDPR Art. 17(3)(b) and (e).
HOLD_GROUNDS = {
    "art17-3-b": "compliance with a legal obligation",
    "art17-3-e": "establishment, exercise or defence of legal claims",
}
#: Why a legal deadline was extended (Art. 12(3)): a fixed vocabulary, not prose.
EXTENSION_REASONS = {
    "complexity": "the request is complex",
    "number_of_requests": "the number of requests",
}
REQUEST_KINDS = ("erasure", "access", "restriction")

#: The events a restriction writes in the subject's own stream (its record, erased
#: with the subject); appends of these alone pass a restriction.
RESTRICTED = "subject.restricted"
RESTRICTION_LIFTED = "subject.restriction_lifted"
RESTRICTION_EVENTS = frozenset({RESTRICTED, RESTRICTION_LIFTED})
REQUEST_STATUSES = ("open", "completed", "refused", "failed")


def check_reference(value: object) -> str:
    if not isinstance(value, str) or not REFERENCE.fullmatch(value):
        raise InvalidInputError(
            "a reference is 1 to 64 of A-Z a-z 0-9 _ . : / - (a ticket or letter id)"
        )
    return value


def check_choice(value: object, vocabulary: dict[str, str], what: str) -> str:
    if not isinstance(value, str) or value not in vocabulary:
        raise InvalidInputError(f"{what} must be one of: " + ", ".join(sorted(vocabulary)))
    return value


# -- acting on a restriction ------------------------------------------------------------

_acting_on: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "oblivio_acting_on_restriction", default=None
)


@contextmanager
def acting_on_restriction(reference: str) -> Iterator[None]:
    """Within the block, writes for a restricted subject are allowed: the operator
    acts on the request named by ``reference`` (Art. 18(2): with the subject's
    consent, for legal claims, …)."""
    token = _acting_on.set(check_reference(reference))
    try:
        yield
    finally:
        _acting_on.reset(token)


def acting_reference() -> str | None:
    """The restriction request the current caller acts on, if any."""
    return _acting_on.get()


# -- restrictions -----------------------------------------------------------------------


def is_restricted(conn: Connection, namespace: str, subject_key: bytes) -> bool:
    """Whether processing of the subject is restricted now (Art. 18)."""
    return restriction(conn, namespace, subject_key) is not None


def restriction(conn: Connection, namespace: str, subject_key: bytes) -> Row | None:
    table = subject_restrictions.c
    return conn.execute(
        sa.select(subject_restrictions).where(
            table.namespace == namespace, table.subject_key == subject_key
        )
    ).first()


def restrict(
    conn: Connection, namespace: str, subject_key: bytes, ground: str, reference: str, now: datetime
) -> None:
    conn.execute(
        sa.insert(subject_restrictions).values(
            namespace=namespace,
            subject_key=subject_key,
            ground=ground,
            reference=reference,
            restricted_at=now,
        )
    )


def lift_restriction(conn: Connection, namespace: str, subject_key: bytes) -> bool:
    table = subject_restrictions.c
    done = conn.execute(
        sa.delete(subject_restrictions).where(
            table.namespace == namespace, table.subject_key == subject_key
        )
    )
    return bool(done.rowcount)


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
