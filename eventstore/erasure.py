"""SQL for erasure requests and the certificates that close them."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from eventstore.schema import certificates, erasure_requests

RequestRow = sa.Row[Any]

OPEN_STATUSES = ("received", "erasing", "rebuilding")


def insert_request(conn: Connection, values: Mapping[str, Any]) -> None:
    conn.execute(erasure_requests.insert().values(**values))


def get_request(
    conn: Connection, request_id: uuid.UUID, *, lock: bool = False, namespace: str | None = None
) -> RequestRow | None:
    """The request, or None; with ``namespace``, None too when it is another namespace's."""
    query = sa.select(erasure_requests).where(erasure_requests.c.request_id == request_id)
    if namespace is not None:
        query = query.where(erasure_requests.c.namespace == namespace)
    if lock:
        query = query.with_for_update()
    return conn.execute(query).first()


def update_request(conn: Connection, request_id: uuid.UUID, **values: Any) -> None:
    conn.execute(
        erasure_requests.update()
        .where(erasure_requests.c.request_id == request_id)
        .values(**values)
    )


def latest_request(
    conn: Connection, namespace: str, subject_key: bytes, kind: str | None = None
) -> RequestRow | None:
    query = sa.select(erasure_requests).where(
        erasure_requests.c.namespace == namespace, erasure_requests.c.subject_key == subject_key
    )
    if kind is not None:
        query = query.where(erasure_requests.c.kind == kind)
    query = query.order_by(erasure_requests.c.received_at.desc()).limit(1)
    return conn.execute(query).first()


def open_requests_past(conn: Connection, now: datetime) -> list[RequestRow]:
    """Requests still open after their legal deadline and not yet flagged overdue."""
    query = sa.select(erasure_requests).where(
        erasure_requests.c.status.in_(OPEN_STATUSES),
        erasure_requests.c.deadline_at < now,
        erasure_requests.c.overdue_at.is_(None),
    )
    return list(conn.execute(query))


def insert_certificate(
    conn: Connection,
    certificate_id: uuid.UUID,
    request_id: uuid.UUID,
    subject_key: bytes,
    issued_at: datetime,
    jws: str,
) -> None:
    conn.execute(
        certificates.insert().values(
            certificate_id=certificate_id,
            request_id=request_id,
            subject_key=subject_key,
            issued_at=issued_at,
            jws=jws,
        )
    )


def get_certificate(
    conn: Connection, certificate_id: uuid.UUID, namespace: str
) -> sa.Row[Any] | None:
    """Certificate ``certificate_id`` if it concerns ``namespace`` (else, as unknown, None)."""
    query = (
        sa.select(certificates)
        .join(erasure_requests, erasure_requests.c.request_id == certificates.c.request_id)
        .where(
            certificates.c.certificate_id == certificate_id,
            erasure_requests.c.namespace == namespace,
        )
    )
    return conn.execute(query).first()


def certificate_of_request(conn: Connection, request_id: uuid.UUID) -> sa.Row[Any] | None:
    query = sa.select(certificates).where(certificates.c.request_id == request_id)
    return conn.execute(query).first()


def in_namespace(namespace: str | None) -> sa.ColumnElement[bool]:
    """Requests of ``namespace``; of every namespace for None."""
    return sa.true() if namespace is None else erasure_requests.c.namespace == namespace


def requests_by_status(conn: Connection, namespace: str | None) -> dict[tuple[str, str], int]:
    """How many erasure requests are in each (namespace, status) (for metrics), of one
    namespace or (None) of all."""
    by = (erasure_requests.c.namespace, erasure_requests.c.status)
    query = sa.select(*by, sa.func.count()).where(in_namespace(namespace)).group_by(*by)
    return {(ns, status): int(count) for ns, status, count in conn.execute(query)}


def count_overdue(conn: Connection, now: datetime, namespace: str | None) -> dict[str, int]:
    """Open requests past their deadline, flagged yet or not, per namespace."""
    query = (
        sa.select(erasure_requests.c.namespace, sa.func.count())
        .where(
            in_namespace(namespace),
            erasure_requests.c.status.in_(OPEN_STATUSES),
            sa.or_(
                erasure_requests.c.overdue_at.is_not(None), erasure_requests.c.deadline_at < now
            ),
        )
        .group_by(erasure_requests.c.namespace)
    )
    return {ns: int(count) for ns, count in conn.execute(query)}
