"""The application's own tables, on one MetaData of their own.

Bookkeeping the application keeps beside the log, not of it: API keys, console
sessions, the periodic jobs' leases and APScheduler's job store.  The same
rules hold as for the log's tables: no personal data in plaintext (secrets and
session tokens only as hashes, user ids only sealed).
"""

from __future__ import annotations

import sqlalchemy as sa

from eventstore.schema import NAMING_CONVENTION, UTCDateTime

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)

# Periodic jobs take a lease here before running, so that several worker
# processes (each with its own scheduler) never run the same job at once.
scheduler_leases = sa.Table(
    "scheduler_leases",
    metadata,
    sa.Column("name", sa.String(100), primary_key=True),
    sa.Column("owner", sa.String(100), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=False),
)

# Bearer API keys: only a hash of each secret is stored.  A user principal's
# user id is sealed under a key derived from the secret itself, so the raw id
# is readable only while a request presents that key.
api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("key_id", sa.String(32), primary_key=True),
    sa.Column("secret_hash", sa.LargeBinary(32), nullable=False),
    sa.Column("principal", sa.String(16), nullable=False),  # user | operator | auditor
    sa.Column("sealed_user_id", sa.LargeBinary, nullable=True),
    sa.Column("subject_ref", sa.String(64), nullable=True),  # for listing, never the raw id
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("revoked_at", UTCDateTime(), nullable=True),
    sa.Column("expires_at", UTCDateTime(), nullable=True),  # None: never expires
    # The tenant the key serves; None only for explicit cluster-wide operator keys.
    sa.Column("namespace", sa.String(64), nullable=True),
)

# APScheduler's SQLAlchemyJobStore table, declared here (same shape as the
# library's) so that migrations create it: the library would otherwise issue
# DDL at start, racing the embedded store's single writer.
apscheduler_jobs = sa.Table(
    "apscheduler_jobs",
    metadata,
    sa.Column("id", sa.Unicode(191), primary_key=True),
    sa.Column("next_run_time", sa.Float(25), index=True),
    sa.Column("job_state", sa.LargeBinary, nullable=False),
)

# Console sign-in sessions.  The cookie holds a random session token; only a
# hash of it is stored, so a copy of the table opens no session.  A user
# principal's id is sealed under a key derived from the token (as API keys
# seal theirs), readable only while the browser presents the cookie.
console_sessions = sa.Table(
    "console_sessions",
    metadata,
    sa.Column("session_hash", sa.LargeBinary(32), primary_key=True),
    sa.Column(
        "key_id",
        sa.String(32),
        sa.ForeignKey("api_keys.key_id", ondelete="CASCADE"),
        nullable=False,
        index=True,
    ),
    sa.Column("principal", sa.String(16), nullable=False),
    sa.Column("sealed_user_id", sa.LargeBinary, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("last_seen_at", UTCDateTime(), nullable=False),
)

# -- the data-protection officer's desk (oblivio.memory.dpo) ---------------------------
# Content-free: subjects by keyed hash, actors by keyed hash, grounds from fixed
# vocabularies, references as identifiers (a ticket or letter id, never prose).

# Legal holds (Art. 17(3)(e)): while a hold is in place (``lifted_at`` null) the
# subject's erasure is refused with the hold's ground; retention sweeps skip them.
legal_holds = sa.Table(
    "legal_holds",
    metadata,
    sa.Column("hold_id", sa.Uuid, primary_key=True),
    sa.Column("namespace", sa.String(64), nullable=False),
    sa.Column("subject_key", sa.LargeBinary(32), nullable=False),
    sa.Column("ground", sa.String(32), nullable=False),
    sa.Column("reference", sa.String(64), nullable=False),
    sa.Column("placed_at", UTCDateTime(), nullable=False),
    sa.Column("placed_by", sa.String(64), nullable=True),  # hex keyed hash of the actor
    sa.Column("lifted_at", UTCDateTime(), nullable=True),
    sa.Column("lifted_by", sa.String(64), nullable=True),
    sa.Index(None, "namespace", "subject_key"),
)

# The request register: one row per data-subject request of any kind (erasure,
# access/portability, restriction), with its legal deadline (Art. 12(3): a month,
# extendable by two with a recorded reason) beside the operational one.  An
# erasure's progress stays in ``erasure_requests`` (``erasure_request_id``).
subject_requests = sa.Table(
    "subject_requests",
    metadata,
    sa.Column("request_id", sa.Uuid, primary_key=True),
    sa.Column("namespace", sa.String(64), nullable=False),
    sa.Column("subject_key", sa.LargeBinary(32), nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),  # erasure | access | restriction
    sa.Column("reference", sa.String(64), nullable=True),
    sa.Column("received_at", UTCDateTime(), nullable=False),
    sa.Column("legal_deadline_at", UTCDateTime(), nullable=False),
    sa.Column("extended_deadline_at", UTCDateTime(), nullable=True),
    sa.Column("extension_reason", sa.String(32), nullable=True),
    sa.Column("operational_deadline_at", UTCDateTime(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),  # open | completed | refused | failed
    sa.Column("outcome", sa.String(64), nullable=True),
    sa.Column("completed_at", UTCDateTime(), nullable=True),
    sa.Column("overdue_at", UTCDateTime(), nullable=True),
    sa.Column("erasure_request_id", sa.Uuid, nullable=True, unique=True),
    sa.Column("requested_by", sa.String(64), nullable=True),  # hex keyed hash of the actor
    sa.Index(None, "namespace", "received_at"),
    sa.Index(None, "namespace", "subject_key"),
)
