"""Erasure orchestration: ``forget`` a subject, ``delete_event`` one event.

Each request commits in one transaction: payloads become tombstones, the
subject's projection rows are purged (for a single event, each projection of the
registry takes out what the event contributed: the node graph derives the part the
event reached again from what remains) with the erased nodes' access counts, the data key
is destroyed (forget), one rebuild job per projection is enqueued and a
content-free audit entry is appended.
From the moment it returns, no read path can return the erased content.  The
rebuild jobs then prove replay equals the live state, and the last one to
finish issues the certificate.
"""

from __future__ import annotations

import calendar
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from appdata import apikeys
from appdata import subject_requests as register_sql
from certificates import merkle_root
from eventstore import (
    AuditEntry,
    EventStore,
    LockedStream,
    RecordedEvent,
    Subject,
    Tombstone,
    Transaction,
    subject_rights,
)
from eventstore import erasure as requests
from eventstore import jobs as job_queue
from eventstore.errors import EventUnavailableError, LegalHoldError
from eventstore.ids import check_namespace, check_subject, parse_uuid
from projections import events as ev
from projections.registry import ProjectionRegistry
from workers.policy import ErasurePolicy, check_legal_ground, check_reason


@dataclass(frozen=True)
class JobStatus:
    projection: str
    status: str
    attempts: int
    last_error: str | None
    max_attempts: int = 0


@dataclass(frozen=True)
class ErasureStatus:
    """Where an erasure request stands; ``certificate`` is set once it completed."""

    request_id: uuid.UUID
    kind: str
    status: str
    subject_ref: str
    received_at: datetime
    deadline_at: datetime
    overdue: bool
    erased_at: datetime | None
    completed_at: datetime | None
    events_erased: int
    certificate_id: uuid.UUID | None
    certificate: dict[str, Any] | None
    jobs: list[JobStatus]


class Eraser:
    """Accepts erasure requests and commits their synchronous part."""

    def __init__(
        self,
        store: EventStore,
        projections: ProjectionRegistry,
        policy: ErasurePolicy,
        clock: Callable[[], datetime],
    ) -> None:
        self.store = store
        self.projections = projections
        self.policy = policy
        self.clock = clock

    # -- forget -----------------------------------------------------------------------

    def forget(
        self,
        namespace: str,
        user_id: str,
        *,
        reason: str = "user_request",
        legal_ground: str,
        actor_id: str | None = None,
        reference: str | None = None,
    ) -> uuid.UUID:
        """Erase every event of the subject's current stream generation; the request id.

        ``reference`` (a ticket or letter id) goes into the request register.  A
        subject under a legal hold is not erased: the refusal is recorded (register,
        audit) and ``LegalHoldError`` names the hold's ground.
        """
        check_namespace(namespace)
        user = check_subject(user_id)
        check_reason(reason)
        check_legal_ground(legal_ground)
        asked = _Asked(reason, legal_ground, actor_id, _reference(reference))
        with self.store.transaction() as tx:
            stream = tx.lock_stream(Subject(namespace, user))
            subject_key = self.store.subject_key(namespace, user)
            if stream is None or stream.closed_at is not None:
                earlier = requests.latest_request(tx.connection, namespace, subject_key, "forget")
                if earlier is not None:
                    return uuid.UUID(str(earlier.request_id))
            refusal = self._refuse_if_held(tx, namespace, subject_key, asked)
            if refusal is None:
                request_id = uuid.uuid4()
                self._forget_stream(tx, request_id, namespace, subject_key, stream, asked)
        if refusal is not None:
            raise refusal
        return request_id

    def _forget_stream(
        self,
        tx: Transaction,
        request_id: uuid.UUID,
        namespace: str,
        subject_key: bytes,
        stream: LockedStream | None,
        asked: _Asked,
    ) -> None:
        now = self.clock()
        values = self._request_values(
            request_id, "forget", _Received(namespace, subject_key, asked, now)
        )
        # The subject's own keys stop working with the rest of them: a forgotten user
        # has no one left to act for.
        values["api_keys_revoked"] = apikeys.revoke_user_keys(tx.connection, subject_key.hex(), now)
        # Erasure overrides a restriction (Art. 18 keeps data; Art. 17 removes it):
        # the restriction ends with the data, and the certificate says it was in place.
        values["subject_restricted"] = subject_rights.lift_restriction(
            tx.connection, namespace, subject_key
        )
        if stream is not None:
            stream_id = stream.ref.stream_id
            self.projections.hold(tx.connection, stream_id)
            values |= self.projections.time_spans(tx.connection, stream_id)  # before the purge
            tombstones = tx.tombstone(stream_id, None, request_id)
            destruction = tx.destroy_data_key(stream_id)
            tx.close_stream(stream_id)
            self.projections.purge_subject(tx.connection, stream_id)
            values |= _erased(stream, tombstones, now) | {
                "dek_id": destruction.dek_id,
                "kek_version": destruction.kek_version,
                "key_destroyed_at": destruction.destroyed_at,
            }
        self._record(tx, values, asked)

    # -- delete one event ---------------------------------------------------------

    def delete_event(
        self,
        namespace: str,
        event_id: uuid.UUID | str,
        *,
        user_id: str | None = None,
        reason: str = "user_request",
        legal_ground: str,
        actor_id: str | None = None,
        reference: str | None = None,
    ) -> uuid.UUID:
        """Erase one event of a subject's current stream; the request id (refused, as
        ``forget`` is, for a subject under a legal hold)."""
        wanted = parse_uuid(event_id, "event id")
        check_reason(reason)
        check_legal_ground(legal_ground)
        asked = _Asked(reason, legal_ground, actor_id, _reference(reference))
        owner = None if user_id is None else self.store.subject_key(namespace, user_id)
        with self.store.transaction() as tx:
            event, derived = self._locked_event(tx, wanted)
            if (
                event is None
                or event.stream.namespace != namespace
                or (owner is not None and event.stream.subject_key != owner)
            ):
                raise EventUnavailableError()
            if event.erasure_request_id is not None:
                return event.erasure_request_id  # already erased: the same request answers
            stream = tx.lock_stream(event.stream.stream_id)
            if stream is None or stream.closed_at is not None:
                raise EventUnavailableError()
            refusal = self._refuse_if_held(tx, namespace, stream.ref.subject_key, asked)
            if refusal is None:
                request_id = uuid.uuid4()
                self._delete_in_stream(tx, request_id, stream, [event, *derived], asked)
        if refusal is not None:
            raise refusal
        return request_id

    def _locked_event(
        self, tx: Transaction, event_id: uuid.UUID
    ) -> tuple[RecordedEvent | None, list[RecordedEvent]]:
        """The event as it stands once its stream is locked, and the events derived from
        it (an ingested message's claims event), read with it.

        Reading first and locking after would let a concurrent delete or
        forget erase the event in between; re-reading under the lock makes a
        racing request answer with the request that erased it.
        """
        found = tx.get_events([event_id])
        if not found:
            return None, []
        tx.lock_stream(found[0].stream.stream_id)
        again = {e.event_id: e for e in tx.get_events([event_id, *ev.derived_event_ids(event_id)])}
        event = again.pop(event_id, None)
        return event, list(again.values())

    def _delete_in_stream(
        self,
        tx: Transaction,
        request_id: uuid.UUID,
        stream: LockedStream,
        erased: Sequence[RecordedEvent],
        asked: _Asked,
    ) -> None:
        """Erase ``erased``: an event and what was derived from it (an ingested message's
        claims event: its claims, plan and identities), read before erasure."""
        now = self.clock()
        stream_id = stream.ref.stream_id
        self.projections.hold(tx.connection, stream_id)
        spans = self.projections.time_spans(tx.connection, stream_id, [e.event_id for e in erased])
        tombstones = tx.tombstone(stream_id, [e.event_id for e in erased], request_id)
        self.projections.purge_events(tx, stream_id, erased)
        received = _Received(stream.ref.namespace, stream.ref.subject_key, asked, now)
        values = self._request_values(request_id, "delete_event", received)
        self._record(tx, values | spans | _erased(stream, tombstones, now), asked)

    # -- shared steps -------------------------------------------------------------

    def _request_values(
        self, request_id: uuid.UUID, kind: str, received: _Received
    ) -> dict[str, Any]:
        """An erasure request row, before what it erased is known."""
        return self._received_values(request_id, received) | {
            "kind": kind,
            "status": "rebuilding",
            "legal_ground": received.asked.legal_ground,
            "reason": received.asked.reason,
            "deadline_at": received.at + self.policy.deadline,
            "erased_at": received.at,
            "events_erased": 0,
            "merkle_root": merkle_root([]),
        }

    def _register_values(self, register_id: uuid.UUID, received: _Received) -> dict[str, Any]:
        """A register row of an erasure (its status still to set)."""
        return self._received_values(register_id, received) | {
            "kind": "erasure",
            "reference": received.asked.reference,
            "legal_deadline_at": legal_deadline(received.at),
            "operational_deadline_at": received.at + self.policy.deadline,
        }

    def _received_values(self, row_id: uuid.UUID, received: _Received) -> dict[str, Any]:
        """The columns a request row and a register row share: which row, about whom,
        asked by whom, and when."""
        return {
            "request_id": row_id,
            "namespace": received.namespace,
            "subject_key": received.subject_key,
            "requested_by": self._actor_ref(received.asked.actor_id),
            "received_at": received.at,
        }

    def _refuse_if_held(
        self, tx: Transaction, namespace: str, subject_key: bytes, asked: _Asked
    ) -> LegalHoldError | None:
        """Under the stream's lock: the refusal of an erasure of a held subject (recorded
        in the register and the audit log with the hold's ground), or None."""
        hold = register_sql.active_hold(tx.connection, namespace, subject_key)
        if hold is None:
            return None
        now = self.clock()
        register_id = uuid.uuid4()
        values = self._register_values(register_id, _Received(namespace, subject_key, asked, now))
        register_sql.register(
            tx.connection,
            values
            | {"status": "refused", "outcome": f"refused:{hold.ground}", "completed_at": now},
        )
        tx.append_audit(
            AuditEntry(
                "erasure.refused",
                namespace=namespace,
                subject_ref=subject_key.hex(),
                actor_ref=self._actor_ref(asked.actor_id),
                object_refs={
                    "register_id": str(register_id),
                    "hold_ground": hold.ground,
                    "hold_reference": hold.reference,
                    **({"reference": asked.reference} if asked.reference else {}),
                },
            )
        )
        return LegalHoldError(hold.ground, hold.reference, register_id)

    def _record(self, tx: Transaction, values: dict[str, Any], asked: _Asked) -> None:
        requests.insert_request(tx.connection, values)
        if asked.reason != "ttl_expired":  # a retention sweep is no one's request
            received = _Received(
                values["namespace"], values["subject_key"], asked, values["received_at"]
            )
            register = self._register_values(uuid.uuid4(), received)
            register_sql.register(
                tx.connection,
                register | {"status": "open", "erasure_request_id": values["request_id"]},
            )
        job_queue.enqueue(
            tx.connection,
            values["request_id"],
            self.projections.versions(),
            values.get("stream_id"),
            values["received_at"],
            self.policy.max_attempts,
        )
        tx.append_audit(
            AuditEntry(
                f"erasure.{values['kind']}",
                namespace=values["namespace"],
                subject_ref=values["subject_key"].hex(),
                actor_ref=self._actor_ref(asked.actor_id),
                object_refs={
                    "request_id": str(values["request_id"]),
                    **({"reference": asked.reference} if asked.reference else {}),
                },
                counts=_counts(values),
                digests={"merkle_root": values["merkle_root"].hex()},
            )
        )

    def _actor_ref(self, actor_id: str | None) -> str | None:
        return None if actor_id is None else self.store.pseudonym("actor", actor_id)


@dataclass(frozen=True)
class _Asked:
    """What an erasure request asked for, as recorded."""

    reason: str
    legal_ground: str
    actor_id: str | None
    reference: str | None


@dataclass(frozen=True)
class _Received:
    """An erasure request as it came in: about whom, what it asked, and when."""

    namespace: str
    subject_key: bytes
    asked: _Asked
    at: datetime


def _reference(reference: str | None) -> str | None:
    return None if reference is None else subject_rights.check_reference(reference)


def legal_deadline(received_at: datetime, months: int = 1) -> datetime:
    """``months`` calendar months after ``received_at`` (Art. 12(3)), on the same day
    of the month or, where that month is shorter, on its last day."""
    month_index = received_at.month - 1 + months
    year, month = received_at.year + month_index // 12, month_index % 12 + 1
    day = min(received_at.day, calendar.monthrange(year, month)[1])
    return received_at.replace(year=year, month=month, day=day)


def _counts(values: dict[str, Any]) -> dict[str, int]:
    counts = {"events": values["events_erased"]}
    if values.get("api_keys_revoked") is not None:
        counts["api_keys_revoked"] = values["api_keys_revoked"]
    if values.get("subject_restricted"):
        counts["restriction_ended"] = 1
    return counts


def _erased(stream: LockedStream, tombstones: Sequence[Tombstone], now: datetime) -> dict[str, Any]:
    """Request columns describing what the tombstones erased."""
    versions = [t.version for t in tombstones]
    return {
        "stream_id": stream.ref.stream_id,
        "events_erased": len(tombstones),
        "version_from": min(versions, default=None),
        "version_to": max(versions, default=None),
        "merkle_root": merkle_root([t.digest for t in tombstones]),
        "chain_head": stream.chain_hash,
        "stream_version": stream.version,
        "erased_at": now,
    }


def request_status(
    store: EventStore, request_id: uuid.UUID | str, now: datetime, namespace: str | None = None
) -> ErasureStatus | None:
    """The status of one erasure request, with its certificate once issued (with
    ``namespace``: None for another namespace's request, as for an unknown one)."""
    wanted = parse_uuid(request_id, "request id")
    with store.reading() as view:
        request = requests.get_request(view.connection, wanted, namespace=namespace)
        if request is None:
            return None
        request_jobs = job_queue.of_request(view.connection, wanted)
        certificate = requests.certificate_of_request(view.connection, wanted)
    open_request = request.status in requests.OPEN_STATUSES
    return ErasureStatus(
        request_id=request.request_id,
        kind=request.kind,
        status=request.status,
        subject_ref=request.subject_key.hex(),
        received_at=request.received_at,
        deadline_at=request.deadline_at,
        overdue=request.overdue_at is not None or (open_request and now > request.deadline_at),
        erased_at=request.erased_at,
        completed_at=request.completed_at,
        events_erased=request.events_erased,
        certificate_id=request.certificate_id,
        certificate=None if certificate is None else json.loads(certificate.jws),
        jobs=[
            JobStatus(j.projection, j.status, j.attempts, j.last_error, j.max_attempts)
            for j in request_jobs
        ],
    )
