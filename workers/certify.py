"""Issuing forget certificates: exactly one per completed erasure request.

The certificate is a JWS (Ed25519, RFC 8785 canonical payload) that anyone
can verify offline from the published JWKS.  It is issued in the same
transaction that sees the request's last rebuild job done, under a lock on
the request row, so concurrent workers cannot issue two.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from certificates import IssuerKeyring, sign
from eventstore import AuditEntry, Transaction, jobs
from eventstore import erasure as requests
from eventstore.keys import KeyProvider, KeyringFile
from projections.storage import snapshot_store
from workers.policy import LEGAL_GROUNDS, KeyPolicy

ISSUER = "oblivio"
#: /2 added ``erasure.data_held``, ``erasure.statement`` and ``api_keys``; /3 a
#: ``proof`` per projection (what its replay covered: the stream, or the part an
#: erasure changed from a named snapshot).  Older certificates lack them and still verify.
CERTIFICATE_FORMAT = "oblivio-forget-certificate/3"

LIMITS = (
    "This certificate attests what this oblivio deployment did to its own log and "
    "projections. It cannot attest to copies made outside it: data returned to callers "
    "before the erasure, application logs, or backups taken before the residual-copy date. "
    "Other data subjects' memories that mention this person are not erased by it."
)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def _span(first: datetime | None, last: datetime | None) -> list[str | None] | None:
    return None if first is None else [_iso(first), _iso(last)]


def _erasure_statement(request: Any) -> str:
    if request.stream_id is None:
        return (
            "No data was held for this subject in this namespace when the request was "
            "received: nothing was erased and no data key was destroyed."
        )
    return f"{request.events_erased} event(s) of the subject were erased."


def _subject(request: Any) -> dict[str, Any]:
    subject = {"reference": request.subject_key.hex(), "namespace": request.namespace}
    if request.subject_restricted:
        # Erasure overrides a restriction of processing (Art. 18); the certificate
        # says one was in place, and ended with the data.
        subject["restricted_when_erased"] = True
    return subject


def _api_keys(revoked: int | None) -> dict[str, Any] | None:
    """What the erasure did to the subject's API keys; None where it leaves them (one event)."""
    if revoked is None:
        return None
    return {
        "revoked": revoked,
        "statement": "The erasure revoked, in its transaction, every API key bound to this "
        "subject in this namespace that was not revoked yet (revoked counts them); none of "
        "them authenticates any more.",
    }


def _projection_result(job: Any, proof: dict[str, Any] | None) -> dict[str, Any]:
    """One projection's replay equality; ``proof`` says what was replayed (/3)."""
    result = {
        "name": job.projection,
        "version": job.projection_version,
        "position": job.position,
        "state_digest": job.state_digest,
        "replay_digest": job.replay_digest,
        "equal": job.state_digest == job.replay_digest,
    }
    if proof is not None:
        result["proof"] = proof
    return result


@dataclass(frozen=True)
class Certifier:
    """Builds, signs and stores certificates."""

    keyring: IssuerKeyring
    keys: KeyProvider
    key_policy: KeyPolicy
    clock: Callable[[], datetime]

    def issue_if_complete(self, tx: Transaction, request_id: uuid.UUID) -> uuid.UUID | None:
        """Issue the request's certificate if all its jobs are done and none exists yet."""
        request = requests.get_request(tx.connection, request_id, lock=True)
        if request is None or request.certificate_id is not None:
            return None
        request_jobs = jobs.of_request(tx.connection, request_id)
        if any(job.status != "done" for job in request_jobs):
            return None
        certificate_id = uuid.uuid4()
        now = self.clock()
        proofs = {
            job.job_id: snapshot_store.take_proof(tx.connection, job.stream_id, job.job_id)
            for job in request_jobs
            if job.stream_id is not None
        }
        payload = self.payload(certificate_id, now, request, request_jobs, proofs)
        jws = json.dumps(sign(payload, self.keyring.active), separators=(",", ":"))
        requests.insert_certificate(
            tx.connection, certificate_id, request_id, request.subject_key, now, jws
        )
        requests.update_request(
            tx.connection,
            request_id,
            status="completed",
            completed_at=now,
            certificate_id=certificate_id,
        )
        tx.append_audit(
            AuditEntry(
                "erasure.certified",
                namespace=request.namespace,
                subject_ref=request.subject_key.hex(),
                object_refs={"request_id": str(request_id), "certificate_id": str(certificate_id)},
                counts={"events": request.events_erased},
                digests={"merkle_root": request.merkle_root.hex()},
            )
        )
        return certificate_id

    def payload(
        self,
        certificate_id: uuid.UUID,
        issued_at: datetime,
        request: Any,
        request_jobs: Sequence[Any],
        proofs: Mapping[uuid.UUID, dict[str, Any] | None] | None = None,
    ) -> dict[str, Any]:
        """Every claim the certificate makes (DESIGN §6), as canonical-JSON-safe values."""
        return {
            "format": CERTIFICATE_FORMAT,
            "certificate_id": str(certificate_id),
            "issued_at": _iso(issued_at),
            "issuer": {"name": ISSUER, "kid": self.keyring.active.kid},
            "request": {
                "request_id": str(request.request_id),
                "kind": request.kind,
                "received_at": _iso(request.received_at),
                "erased_at": _iso(request.erased_at),
                "legal_ground": request.legal_ground,
                "legal_ground_text": LEGAL_GROUNDS[request.legal_ground],
                "reason": request.reason,
                "requested_by": request.requested_by,
            },
            "subject": _subject(request),
            "erasure": {
                # A forget of a subject the store never held anything of is certified
                # too (the person asked); this says so, rather than leaving it to be
                # inferred from zero counts.
                "data_held": request.stream_id is not None,
                "statement": _erasure_statement(request),
                "events_erased": request.events_erased,
                "stream_version_range": (
                    None
                    if request.version_from is None
                    else [request.version_from, request.version_to]
                ),
                "merkle_root": request.merkle_root.hex(),
                "merkle_tree": "RFC 6962 over SHA-256 ciphertext digests, in stream order",
                # Both times of the erased memories (docs/memory.md, "Time").
                "recorded_between": _span(request.recorded_from, request.recorded_to),
                "occurred_between": _span(request.occurred_from, request.occurred_to),
            },
            "key_destruction": (
                None
                if request.dek_id is None
                else {"dek_id": str(request.dek_id), "destroyed_at": _iso(request.key_destroyed_at)}
            ),
            "api_keys": _api_keys(request.api_keys_revoked),
            "projections": [
                _projection_result(job, (proofs or {}).get(job.job_id)) for job in request_jobs
            ],
            "log": {
                "chain_head": None if request.chain_head is None else request.chain_head.hex(),
                "stream_version": request.stream_version,
            },
            "residual_copies": self.residual_copies(request.kek_version),
            "limits": LIMITS,
        }

    def residual_copies(self, kek_version: int | None) -> dict[str, Any]:
        """When copies of the destroyed key left in backups or dead rows stop being usable."""
        if kek_version is None:
            return {
                "kek_version": None,
                "unrecoverable_after": None,
                "planned": False,
                "statement": "No data key was destroyed; erased payloads were removed from the "
                "log and projections. Backups taken earlier still hold their ciphertext until "
                "they expire.",
            }
        retire_by, planned = self._retirement_date(kek_version)
        return {
            "kek_version": kek_version,
            "unrecoverable_after": _iso(retire_by),
            # planned: the date follows the rotation schedule in force; it becomes a
            # fact only when that KEK version is retired (see workers.keys).
            "planned": planned,
            "statement": (
                "Copies of the destroyed data key can survive in backups, WAL or dead rows only "
                f"wrapped under key-encryption key version {kek_version}; once that version is "
                "retired they can no longer be unwrapped."
            ),
        }

    def _retirement_date(self, kek_version: int) -> tuple[datetime | None, bool]:
        """When the KEK version is (or is scheduled to be) retired, and whether that is a plan."""
        if not isinstance(self.keys, KeyringFile):
            return None, True  # an external KMS decides; the statement still names the version
        for record in self.keys.kek_records():
            if record.version == kek_version:
                if record.retired_at is not None:
                    return record.retired_at, False
                policy = self.key_policy
                return record.created_at + policy.rotate_every + policy.retire_after, True
        return None, True
