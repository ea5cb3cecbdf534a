"""Periodic maintenance: retention sweeps, the lease reaper, the overdue watchdog.

Each function is one idempotent pass, safe to run from several processes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from appdata import subject_requests as register_sql
from eventstore import AuditEntry, EventStore, Transaction
from eventstore import erasure as requests
from eventstore import jobs as job_queue
from projections.model import Scope
from projections.reads import GraphReads
from workers.erasure import Eraser
from workers.policy import RETENTION_LEGAL_GROUND
from workers.rebuild import mark_request_failed

SWEEP_BATCH = 200
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetentionPolicy:
    """Memories of ``scope`` in ``namespace`` live at most ``max_age``."""

    namespace: str
    scope: Scope
    max_age: timedelta

    @classmethod
    def parse(cls, text: str) -> RetentionPolicy:
        """``namespace/scope=days``, e.g. ``default/session=30``."""
        target, _, days = text.partition("=")
        namespace, _, scope = target.partition("/")
        return cls(namespace.strip(), Scope(scope.strip()), timedelta(days=float(days)))


def sweep_retention(
    store: EventStore,
    eraser: Eraser,
    policies: Sequence[RetentionPolicy],
    clock: Callable[[], datetime],
) -> int:
    """Erase expired events (reason ``ttl_expired``), each certified like any erasure.

    Subjects under a legal hold (Art. 17(3)) are skipped: the sweep logs how many
    it skipped and appends one ``retention.held_skipped`` audit entry saying so.
    """
    erased = 0
    for policy in policies:
        cutoff = clock() - policy.max_age
        with store.reading() as view:
            held = register_sql.held_keys(view.connection, policy.namespace)
            skipped = GraphReads(view).subjects_with_events_before(
                policy.namespace, policy.scope, cutoff, held
            )
        if skipped:
            _say_held_skipped(store, policy, skipped)
        while True:
            with store.reading() as view:
                expired = GraphReads(view).events_recorded_before(
                    policy.namespace, policy.scope, cutoff, SWEEP_BATCH, skip_subjects=held
                )
            for event_id in expired:
                eraser.delete_event(
                    policy.namespace,
                    event_id,
                    reason="ttl_expired",
                    legal_ground=RETENTION_LEGAL_GROUND,
                    actor_id="oblivio:retention",
                )
            erased += len(expired)
            if len(expired) < SWEEP_BATCH:
                break
    return erased


def _say_held_skipped(store: EventStore, policy: RetentionPolicy, subjects: int) -> None:
    log.warning(
        "retention sweep of %s/%s skipped %d subject(s) under a legal hold",
        policy.namespace,
        policy.scope.value,
        subjects,
    )
    store.append_audit(
        AuditEntry(
            "retention.held_skipped",
            namespace=policy.namespace,
            object_refs={"scope": policy.scope.value},
            counts={"subjects": subjects},
        )
    )


def reap_leases(store: EventStore, clock: Callable[[], datetime]) -> int:
    """Fail jobs whose worker died on their last attempt, and their requests."""
    with store.transaction() as tx:
        failed = job_queue.expired_to_failed(tx.connection, clock())
        for job in failed:
            mark_request_failed(tx, job.request_id, f"rebuild of {job.projection} failed")
    return len(failed)


def flag_overdue(
    store: EventStore,
    clock: Callable[[], datetime],
    notify: Callable[[dict[str, Any]], object] | None = None,
) -> int:
    """Mark requests still open after their legal deadline, and say so in the audit log.

    Each request is flagged once: then a warning is logged and, when given,
    ``notify`` is called with what the overdue webhook sends (after the
    commit, so a slow receiver holds no transaction open).
    """
    now = clock()
    with store.transaction() as tx:
        registered = _flag_registered(tx, now)
        overdue = requests.open_requests_past(tx.connection, now)
        for request in overdue:
            requests.update_request(tx.connection, request.request_id, overdue_at=now)
            tx.append_audit(
                AuditEntry(
                    "erasure.overdue",
                    namespace=request.namespace,
                    subject_ref=request.subject_key.hex(),
                    object_refs={"request_id": str(request.request_id)},
                )
            )
    notices = [_overdue_notice(r, r.deadline_at, now) for r in overdue]
    notices += [_registered_notice(row, now) for row in registered]
    for notice in notices:
        log.warning(
            "%s: %s request %s passed its deadline %s and is still %s",
            notice["event"],
            notice["kind"],
            notice["request_id"],
            notice["deadline_at"],
            notice["status"],
        )
        if notify is not None:
            notify(notice)
    return len(notices)


def _flag_registered(tx: Transaction, now: datetime) -> list[Any]:
    """Flag the register's open requests of other kinds than erasure (access,
    restriction) past their operational deadline, once each, in the audit log too."""
    rows = register_sql.overdue_unflagged(tx.connection, now)
    for row in rows:
        register_sql.flag_overdue(tx.connection, row.request_id, now)
        tx.append_audit(
            AuditEntry(
                "request.overdue",
                namespace=row.namespace,
                subject_ref=row.subject_key.hex(),
                object_refs={"register_id": str(row.request_id), "kind": row.kind},
            )
        )
    return rows


def _registered_notice(row: Any, now: datetime) -> dict[str, Any]:
    deadline = row.operational_deadline_at
    return _overdue_notice(row, deadline, now, "request.overdue") | {
        "reference": row.reference,
        "legal_deadline_at": (row.extended_deadline_at or row.legal_deadline_at).isoformat(),
    }


def _overdue_notice(
    request: Any, deadline: datetime, now: datetime, event: str = "erasure.overdue"
) -> dict[str, Any]:
    """What the overdue webhook is sent about a request (an erasure request or a register
    row) that passed ``deadline``: content-free, the subject by its reference only."""
    return {
        "event": event,
        "request_id": str(request.request_id),
        "kind": request.kind,
        "status": request.status,
        "subject_ref": request.subject_key.hex(),
        "received_at": request.received_at.isoformat(),
        "deadline_at": deadline.isoformat(),
        "flagged_at": now.isoformat(),
    }
