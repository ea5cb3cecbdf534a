"""Periodic maintenance: retention sweeps, the lease reaper, the overdue watchdog.

Each function is one idempotent pass, safe to run from several processes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from eventstore import AuditEntry, EventStore
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
    """Erase expired events (reason ``ttl_expired``), each certified like any erasure."""
    erased = 0
    for policy in policies:
        cutoff = clock() - policy.max_age
        while True:
            with store.reading() as view:
                expired = GraphReads(view).events_recorded_before(
                    policy.namespace, policy.scope, cutoff, SWEEP_BATCH
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
    for request in overdue:
        log.warning(
            "erasure request %s (%s) passed its deadline %s and is still %s",
            request.request_id,
            request.kind,
            request.deadline_at.isoformat(),
            request.status,
        )
        if notify is not None:
            notify(_overdue_notice(request, now))
    return len(overdue)


def _overdue_notice(request: Any, now: datetime) -> dict[str, Any]:
    return {
        "event": "erasure.overdue",
        "request_id": str(request.request_id),
        "kind": request.kind,
        "status": request.status,
        "subject_ref": request.subject_key.hex(),
        "received_at": request.received_at.isoformat(),
        "deadline_at": request.deadline_at.isoformat(),
        "flagged_at": now.isoformat(),
    }
