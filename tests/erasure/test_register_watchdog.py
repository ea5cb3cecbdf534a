"""The overdue watchdog covers the register's requests of every kind: an open
access or restriction request past its operational deadline is flagged once, in
the audit log and through the webhook's callback."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from appdata import subject_requests as register_sql
from oblivio import MemoryClient
from oblivio.memory import oversight
from oblivio.memory.oversight import AuditFilters
from workers.erasure import legal_deadline
from workers.maintenance import flag_overdue


def test_an_open_access_request_past_its_deadline_is_flagged_once(client: MemoryClient) -> None:
    ctx = client.context
    received = ctx.clock() - timedelta(days=5)
    key = ctx.store.subject_key(ctx.namespace, "alice")
    with ctx.store.transaction() as tx:  # received by letter, not served yet
        register_sql.register(
            tx.connection,
            {
                "request_id": uuid.uuid4(),
                "namespace": ctx.namespace,
                "subject_key": key,
                "kind": "access",
                "reference": "LETTER-9",
                "received_at": received,
                "legal_deadline_at": legal_deadline(received),
                "operational_deadline_at": received + timedelta(hours=72),
                "status": "open",
            },
        )
    told: list[dict[str, Any]] = []
    assert flag_overdue(ctx.store, ctx.clock, told.append) == 1
    assert flag_overdue(ctx.store, ctx.clock, told.append) == 0  # once
    assert [(n["event"], n["kind"], n["reference"]) for n in told] == [
        ("request.overdue", "access", "LETTER-9")
    ]
    [entry] = client.request_register(overdue_only=True).entries
    assert entry.overdue
    audit = oversight.audit_trail(ctx, filters=AuditFilters(action="request.overdue"))
    assert audit.total == 1
