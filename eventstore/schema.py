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

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
    }
)


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


# SQLite only gives AUTOINCREMENT (positions never reused after deletes) to an
# INTEGER PRIMARY KEY column, so the 64-bit type becomes INTEGER there.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

streams = sa.Table(
    "streams",
    metadata,
    sa.Column("stream_id", BigId, primary_key=True, autoincrement=True),
    sa.Column("namespace", sa.String(64), nullable=False),
    sa.Column("subject_key", sa.LargeBinary(32), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("chain_hash", sa.LargeBinary(32), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("closed_at", UTCDateTime(), nullable=True),
    sa.Column("key_destroyed_at", UTCDateTime(), nullable=True),
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
    # of the global order (see eventstore.postgres).
    sa.Column("commit_group", sa.BigInteger, nullable=False),
    sa.Column("event_id", sa.Uuid, nullable=False, unique=True),
    sa.Column("stream_id", BigId, sa.ForeignKey("streams.stream_id"), nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("type", sa.String(100), nullable=False),
    sa.Column("schema_version", sa.Integer, nullable=False),
    sa.Column("recorded_at", UTCDateTime(), nullable=False),
    sa.Column("payload", sa.LargeBinary, nullable=True),
    sa.Column("metadata", sa.LargeBinary, nullable=True),
    sa.Column("digest", sa.LargeBinary(32), nullable=False),
    sa.Column("chain_hash", sa.LargeBinary(32), nullable=False),
    sa.Column("erased_at", UTCDateTime(), nullable=True),
    sa.Column("erasure_request_id", sa.Uuid, nullable=True),
    sa.UniqueConstraint("stream_id", "version"),
    sa.Index(None, "commit_group", "position"),
    sqlite_autoincrement=True,
)
