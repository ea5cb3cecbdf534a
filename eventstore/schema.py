"""Tables of the log, on one MetaData.

Nothing here holds personal data in plaintext: subjects appear only as a
keyed hash (``subject_key``), payloads and metadata only as AES-GCM
ciphertext, and data keys only wrapped by a key-encryption key.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

#: How constraints and indexes are named, here and in every package's tables
#: (the migration helpers of ``eventstore.migrations.ops`` spell the same names).
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend, exact to the microsecond.

    SQLite has no timezone-aware type; storing naive UTC and re-attaching UTC
    on the way out keeps values identical across backends, which matters
    because recorded times are covered by the integrity chain.
    """

    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not accepted; use UTC-aware values")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC)


#: ``info`` key of schema items that exist on one dialect only (migrations
#: compare them only there).
ONLY_ON = "only_on_dialect"

# SQLite only gives AUTOINCREMENT (positions never reused after deletes) to an
# INTEGER PRIMARY KEY column, so the 64-bit type becomes INTEGER there.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

streams = sa.Table(
    "streams",
    metadata,
    # Given by ``stream_directory``, whose row a generation's creation inserts first
    # (the column's own sequence, from before the directory, is no longer drawn from).
    sa.Column("stream_id", BigId, primary_key=True, autoincrement=True),
    sa.Column("namespace", sa.String(64), nullable=False),
    sa.Column("subject_key", sa.LargeBinary(32), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("chain_hash", sa.LargeBinary(32), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("closed_at", UTCDateTime(), nullable=True),
    sa.Column("key_destroyed_at", UTCDateTime(), nullable=True),
    # Whether processing of the subject is restricted (GDPR Art. 18): the register
    # row's state (``subject_restrictions``) on the row every append moves, so the
    # append's own conditional UPDATE sees it.  Under READ COMMITTED an UPDATE that
    # waited for a concurrent restriction re-checks only the row it updates, never
    # another table: a restriction kept only there would let the append through.
    sa.Column("restricted", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.UniqueConstraint("namespace", "subject_key", "generation"),
    sqlite_autoincrement=True,
)

# Which stream is a subject's generation: the one place a subject is looked up by
# (namespace, subject_key), and the one that keeps two first writers from creating
# the same generation twice (its unique key).  Written once, when a generation is
# created; never updated (a generation's head, closed and key-destroyed stamps live
# on its ``streams`` row).  Its ids are the streams' ids: a generation's directory
# row is inserted first and names the ``streams`` row inserted with it.  It exists
# so that ``streams`` can be found by stream id alone, which lets a cluster keep
# each stream row on the shard of its events (eventstore.backends.citus) while this
# small table stays on the coordinator.
stream_directory = sa.Table(
    "stream_directory",
    metadata,
    sa.Column("stream_id", BigId, primary_key=True, autoincrement=True),
    sa.Column("namespace", sa.String(64), nullable=False),
    sa.Column("subject_key", sa.LargeBinary(32), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.UniqueConstraint("namespace", "subject_key", "generation"),
    sqlite_autoincrement=True,
)

data_keys = sa.Table(
    "data_keys",
    metadata,
    sa.Column("dek_id", sa.Uuid, primary_key=True),
    sa.Column(
        "stream_id",
        BigId,
        sa.ForeignKey("streams.stream_id", ondelete="CASCADE"),
        nullable=False,
        unique=True,
    ),
    sa.Column("kek_version", sa.Integer, nullable=False),
    sa.Column("wrapped_key", sa.LargeBinary, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)

events = sa.Table(
    "events",
    metadata,
    sa.Column("position", BigId, primary_key=True, autoincrement=True),
    # The writing transaction's id on PostgreSQL, 0 on SQLite: the first half
    # of the global order (see eventstore.backends.postgres).
    sa.Column("commit_group", sa.BigInteger, nullable=False),
    sa.Column("event_id", sa.Uuid, nullable=False, unique=True),
    sa.Column("stream_id", BigId, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("type", sa.String(100), nullable=False),
    sa.Column("schema_version", sa.Integer, nullable=False),
    sa.Column("recorded_at", UTCDateTime(), nullable=False),
    # Data and metadata sealed together (one AES-GCM ciphertext); NULL once tombstoned.
    sa.Column("payload", sa.LargeBinary, nullable=True),
    sa.Column("digest", sa.LargeBinary(32), nullable=False),
    sa.Column("chain_hash", sa.LargeBinary(32), nullable=False),
    sa.Column("erased_at", UTCDateTime(), nullable=True),
    sa.Column("erasure_request_id", sa.Uuid, nullable=True),
    sa.UniqueConstraint("stream_id", "version"),
    # SQLite only.  On PostgreSQL every event row is inserted by a statement
    # whose rows come FROM the stream row it has just updated or inserted
    # (eventstore.backends.postgres), and stream rows are never deleted, so the check
    # could never fail there; it cost a trigger call per row, a sixth of a
    # batch's execution on the server (migration es0003 drops it).
    sa.ForeignKeyConstraint(["stream_id"], ["streams.stream_id"], info={ONLY_ON: "sqlite"}).ddl_if(
        dialect="sqlite"
    ),
    # The global order on PostgreSQL.  SQLite orders the log by position
    # alone (its group is always 0) and seeks the rowid, so there the index
    # would only cost a page write per append.
    sa.Index(None, "commit_group", "position", info={ONLY_ON: "postgresql"}).ddl_if(
        dialect="postgresql"
    ),
    sqlite_autoincrement=True,
)

# -- erasure bookkeeping -------------------------------------------------------------
# Content-free by construction: subjects by keyed hash, actors by keyed hash,
# reasons and legal grounds from fixed vocabularies.

erasure_requests = sa.Table(
    "erasure_requests",
    metadata,
    sa.Column("request_id", sa.Uuid, primary_key=True),
    sa.Column("kind", sa.String(32), nullable=False),  # forget | delete_event | retention
    sa.Column("namespace", sa.String(64), nullable=False),
    sa.Column("subject_key", sa.LargeBinary(32), nullable=False, index=True),
    sa.Column("stream_id", BigId, nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("legal_ground", sa.String(64), nullable=False),
    sa.Column("reason", sa.String(64), nullable=False),
    sa.Column("requested_by", sa.String(64), nullable=True),  # hex keyed hash of the actor
    sa.Column("received_at", UTCDateTime(), nullable=False),
    sa.Column("deadline_at", UTCDateTime(), nullable=False),
    sa.Column("erased_at", UTCDateTime(), nullable=True),
    sa.Column("completed_at", UTCDateTime(), nullable=True),
    sa.Column("overdue_at", UTCDateTime(), nullable=True),
    sa.Column("events_erased", sa.Integer, nullable=False),
    sa.Column("version_from", sa.BigInteger, nullable=True),
    sa.Column("version_to", sa.BigInteger, nullable=True),
    # The time spans of the erased memories, for the certificate: when the log
    # recorded them and when they took effect (their effective time).  Content-free
    # bounds, null when no memory was erased (or for requests older than es0010).
    sa.Column("recorded_from", UTCDateTime(), nullable=True),
    sa.Column("recorded_to", UTCDateTime(), nullable=True),
    sa.Column("occurred_from", UTCDateTime(), nullable=True),
    sa.Column("occurred_to", UTCDateTime(), nullable=True),
    sa.Column("merkle_root", sa.LargeBinary(32), nullable=False),
    sa.Column("dek_id", sa.Uuid, nullable=True),
    sa.Column("kek_version", sa.Integer, nullable=True),
    sa.Column("key_destroyed_at", UTCDateTime(), nullable=True),
    sa.Column("chain_head", sa.LargeBinary(32), nullable=True),
    sa.Column("stream_version", sa.BigInteger, nullable=True),
    sa.Column("certificate_id", sa.Uuid, nullable=True),
    sa.Column("error", sa.String(500), nullable=True),
    # forget: the subject's user API keys it revoked; null for other kinds.
    sa.Column("api_keys_revoked", sa.Integer, nullable=True),
    # forget: whether processing of the subject was restricted (Art. 18) when it was
    # erased (the restriction ends with the data); null for other kinds and before.
    sa.Column("subject_restricted", sa.Boolean, nullable=True),
)

# The one table of leased work (eventstore.leased_work), one queue per ``kind``:
# ``erasure``, a projection's rebuild after an erasure request (``request_id``);
# ``reembed``, one subject's re-embedding in a re-embedding job (``request_id``
# is that job's id, ``nodes_embedded`` its progress).
rebuild_jobs = sa.Table(
    "rebuild_jobs",
    metadata,
    sa.Column("job_id", sa.Uuid, primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("request_id", sa.Uuid, nullable=False, index=True),
    sa.Column("projection", sa.String(64), nullable=False),
    sa.Column("projection_version", sa.Integer, nullable=False),
    sa.Column("stream_id", BigId, nullable=True),
    sa.Column("status", sa.String(16), nullable=False),  # queued | running | done | failed
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("max_attempts", sa.Integer, nullable=False),
    sa.Column("run_after", UTCDateTime(), nullable=False),
    sa.Column("lease_owner", sa.String(100), nullable=True),
    sa.Column("lease_expires_at", UTCDateTime(), nullable=True),
    sa.Column("last_error", sa.String(500), nullable=True),
    sa.Column("position", sa.String(64), nullable=True),
    sa.Column("state_digest", sa.String(64), nullable=True),
    sa.Column("replay_digest", sa.String(64), nullable=True),
    sa.Column("nodes_embedded", sa.BigInteger, nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("finished_at", UTCDateTime(), nullable=True),
    sa.Index(None, "status", "run_after"),
)

certificates = sa.Table(
    "certificates",
    metadata,
    sa.Column("certificate_id", sa.Uuid, primary_key=True),
    sa.Column("request_id", sa.Uuid, nullable=False, unique=True),
    sa.Column("subject_key", sa.LargeBinary(32), nullable=False, index=True),
    sa.Column("issued_at", UTCDateTime(), nullable=False),
    sa.Column("jws", sa.Text, nullable=False),
)

# Facts about the store itself, one row each.  ``store_id`` (a random UUID
# written on first open) names the store's keyring file, which the embedded
# default keeps outside the data directory: a copy of the database carries the
# id that says which keyring it needs, never the keys.
store_identity = sa.Table(
    "store_identity",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.String(64), nullable=False),
)

# One row per audit entry: the entry's content-free fields the audit page filters
# on (no more than the entry itself holds), so a page of the newest entries, or of
# one subject's, reads that page and not the whole audit stream.  Written in the
# transaction that appends the entry; entries older than the table are indexed
# from the stream on first use (``eventstore.audit_index``).
audit_index = sa.Table(
    "audit_index",
    metadata,
    sa.Column("version", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("event_id", sa.Uuid, nullable=False),
    sa.Column("recorded_at", UTCDateTime(), nullable=False),
    sa.Column("namespace", sa.String(64), nullable=True),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("subject_ref", sa.String(128), nullable=True),
    sa.Column("actor_ref", sa.String(128), nullable=True),
    sa.Index(None, "namespace", "version"),
    sa.Index(None, "subject_ref", "version"),
    sa.Index(None, "actor_ref", "version"),
    sa.Index(None, "action", "version"),
    sa.Index(None, "recorded_at"),
)

# -- the data-protection officer's desk ---------------------------------------------
# Content-free like the erasure bookkeeping: subjects by keyed hash, actors by keyed
# hash, grounds from fixed vocabularies, references as identifiers (a ticket or
# letter id, never prose).

# Subjects whose processing is restricted (GDPR Art. 18) now.  The record is the
# restriction events in the subject's own stream; this row is their current state,
# written in the same transaction, so every automated path can ask one indexed
# question under the stream lock.  A forget deletes it with the stream.
subject_restrictions = sa.Table(
    "subject_restrictions",
    metadata,
    sa.Column("namespace", sa.String(64), primary_key=True),
    sa.Column("subject_key", sa.LargeBinary(32), primary_key=True),
    sa.Column("ground", sa.String(32), nullable=False),
    sa.Column("reference", sa.String(64), nullable=False),
    sa.Column("restricted_at", UTCDateTime(), nullable=False),
)
