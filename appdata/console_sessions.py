"""Console sign-in sessions: create, resolve, refresh, end.

A browser holds a random token in a cookie; the table keeps SHA-256 of it,
the API key it was opened with (revoking the key ends its sessions) and, for
user principals, the user id sealed under a key derived from the token.
Sessions live in the database so that an idle timeout holds across every API
process sharing it.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from appdata.apikeys import Principal
from appdata.tables import api_keys, console_sessions
from eventstore import crypto


def _hash(token: str) -> bytes:
    return hashlib.sha256(b"oblivio/console/session\0" + token.encode()).digest()


def _seal_key(token: str) -> bytes:
    return hashlib.sha256(b"oblivio/console/seal\0" + token.encode()).digest()


def open_session(conn: Connection, who: Principal, now: datetime) -> str:
    """Store a session for ``who``; the token for the cookie (never stored)."""
    token = secrets.token_urlsafe(32)
    session_hash = _hash(token)
    sealed = None
    if who.user_id is not None:
        sealed = crypto.encrypt(_seal_key(token), who.user_id.encode(), session_hash)
    conn.execute(
        console_sessions.insert().values(
            session_hash=session_hash,
            key_id=who.key_id,
            principal=who.kind,
            sealed_user_id=sealed,
            created_at=now,
            last_seen_at=now,
        )
    )
    return token


@dataclass(frozen=True)
class Session:
    """A stored session: whom it stands for, when it was last used, and whether the
    API key it was opened with still holds."""

    principal: Principal
    last_seen_at: datetime
    key_revoked: bool

    def ended(self, now: datetime, idle: timedelta) -> bool:
        """Idle longer than ``idle``, or its key revoked or expired since."""
        return self.key_revoked or self.principal.expired(now) or self.last_seen_at <= now - idle


def find(conn: Connection, token: str) -> Session | None:
    """The session of ``token``, or None (unknown or ended)."""
    session_hash = _hash(token)
    row = conn.execute(
        sa.select(
            console_sessions, api_keys.c.revoked_at, api_keys.c.expires_at, api_keys.c.namespace
        )
        .join(api_keys, api_keys.c.key_id == console_sessions.c.key_id)
        .where(console_sessions.c.session_hash == session_hash)
    ).first()
    if row is None:
        return None
    user_id = None
    if row.sealed_user_id is not None:
        user_id = crypto.decrypt(_seal_key(token), row.sealed_user_id, session_hash).decode()
    principal = Principal(
        row.key_id, row.principal, user_id, row.expires_at, namespace=row.namespace
    )
    return Session(principal, row.last_seen_at, row.revoked_at is not None)


def touch(conn: Connection, token: str, now: datetime) -> None:
    """Record that the session was used at ``now``."""
    conn.execute(
        console_sessions.update()
        .where(console_sessions.c.session_hash == _hash(token))
        .values(last_seen_at=now)
    )


def end(conn: Connection, token: str) -> None:
    conn.execute(console_sessions.delete().where(console_sessions.c.session_hash == _hash(token)))


def end_idle(conn: Connection, now: datetime, idle: timedelta) -> int:
    """Delete every session idle longer than ``idle``; how many."""
    result = conn.execute(
        console_sessions.delete().where(console_sessions.c.last_seen_at <= now - idle)
    )
    return result.rowcount
