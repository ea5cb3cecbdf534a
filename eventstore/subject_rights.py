"""Restriction of processing (GDPR Art. 18) in the log, and the vocabularies of the
data-protection officer's desk (its holds and register are ``appdata.subject_requests``).

Content-free like the erasure bookkeeping: subjects by keyed hash, grounds from
fixed vocabularies, references as identifiers.

``is_restricted`` is the one predicate every automated path asks (retrieval,
claim extraction, archiving, likely updates) before it touches a subject: it is
one primary-key lookup, cheap enough to ask under the stream lock.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.errors import InvalidInputError
from eventstore.schema import streams, subject_restrictions

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
    """Restrict processing of the subject: the register row, and the flag on its stream
    rows.  The caller holds the stream's lock."""
    conn.execute(
        sa.insert(subject_restrictions).values(
            namespace=namespace,
            subject_key=subject_key,
            ground=ground,
            reference=reference,
            restricted_at=now,
        )
    )
    _flag_streams(conn, namespace, subject_key, restricted=True)


def lift_restriction(conn: Connection, namespace: str, subject_key: bytes) -> bool:
    """End the subject's restriction (register row and stream flag); whether there was
    one.  The caller holds the stream's lock."""
    table = subject_restrictions.c
    done = conn.execute(
        sa.delete(subject_restrictions).where(
            table.namespace == namespace, table.subject_key == subject_key
        )
    )
    if not done.rowcount:
        return False
    _flag_streams(conn, namespace, subject_key, restricted=False)
    return True


def _flag_streams(
    conn: Connection, namespace: str, subject_key: bytes, *, restricted: bool
) -> None:
    """The register row's state on every generation of the subject's stream: the row
    the append's conditional UPDATE moves (see ``eventstore.schema.streams``)."""
    conn.execute(
        sa.update(streams)
        .where(streams.c.namespace == namespace, streams.c.subject_key == subject_key)
        .values(restricted=restricted)
    )
