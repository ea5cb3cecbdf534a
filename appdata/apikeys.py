"""Bearer API keys: issue, look up, list, revoke.

A token reads ``obl_<key id>_<secret>``.  A key may carry an expiry, after
which it authenticates no more (as if revoked).  The database keeps SHA-256 of the
secret (compared in constant time) and, for user principals, the user id
sealed with AES-GCM under a key derived from the secret: a stolen database
reveals neither usable keys nor whom they belong to.

Every key belongs to one namespace, the tenant its requests are served in;
only an operator key may instead be cluster-wide (``namespace`` None), and
only when made so explicitly.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from appdata.tables import api_keys
from eventstore import EventStore, crypto
from eventstore.errors import InvalidInputError
from eventstore.ids import check_namespace

PRINCIPALS = frozenset({"user", "operator", "auditor"})
KEY_PREFIX = "obl"


@dataclass(frozen=True)
class Principal:
    key_id: str
    kind: str
    user_id: str | None  # set for user principals only
    expires_at: datetime | None = None
    #: The tenant the key serves; ``None`` for a cluster-wide operator key.  No
    #: default: a principal that forgot its namespace must not pass for cluster-wide.
    namespace: str | None = field(kw_only=True)

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


@dataclass(frozen=True)
class KeyInfo:
    key_id: str
    principal: str  # user | operator | auditor
    subject_ref: str | None
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None
    namespace: str | None = None  # None: a cluster-wide operator key


def _secret_key(secret: str) -> bytes:
    return hashlib.sha256(b"oblivio/api-key/seal\0" + secret.encode()).digest()


def _secret_hash(secret: str) -> bytes:
    return hashlib.sha256(b"oblivio/api-key/hash\0" + secret.encode()).digest()


def issue(
    conn: Connection,
    kind: str,
    user_id: str | None,
    subject_ref: str | None,
    now: datetime,
    expires_at: datetime | None = None,
    *,
    namespace: str | None,
) -> tuple[KeyInfo, str]:
    """Store a new key of ``namespace`` (``None``: a cluster-wide operator key); its
    description and its token (shown once, never stored)."""
    if kind not in PRINCIPALS:
        raise InvalidInputError("principal must be user, operator or auditor")
    if (kind == "user") != (user_id is not None):
        raise InvalidInputError("a user key needs a user id; other keys must not have one")
    if namespace is None and kind != "operator":
        raise InvalidInputError("only operator keys may be cluster-wide")
    if namespace is not None:
        check_namespace(namespace)
    if expires_at is not None and expires_at.tzinfo is None:
        raise InvalidInputError("a key's expiry must be a time zone-aware time")
    key_id = secrets.token_hex(8)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(24)).decode().rstrip("=")
    sealed = None
    if user_id is not None:
        sealed = crypto.encrypt(_secret_key(secret), user_id.encode(), key_id.encode())
    conn.execute(
        api_keys.insert().values(
            key_id=key_id,
            secret_hash=_secret_hash(secret),
            principal=kind,
            sealed_user_id=sealed,
            subject_ref=subject_ref,
            created_at=now,
            expires_at=expires_at,
            namespace=namespace,
        )
    )
    info = KeyInfo(key_id, kind, subject_ref, now, None, expires_at, namespace)
    return info, f"{KEY_PREFIX}_{key_id}_{secret}"


# Built once: every authenticated request runs it.
_KEY_BY_ID = sa.select(api_keys).where(api_keys.c.key_id == sa.bindparam("key_id"))


def authenticate(conn: Connection, token: str, now: datetime) -> Principal | None:
    """The principal a token stands for at ``now``, or ``None`` (unknown, wrong,
    revoked or expired)."""
    prefix, _, rest = token.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != KEY_PREFIX or not key_id or not secret:
        return None
    row = conn.execute(_KEY_BY_ID, {"key_id": key_id}).first()
    if row is None or row.revoked_at is not None:
        return None
    if row.expires_at is not None and row.expires_at <= now:
        return None
    if not hmac.compare_digest(row.secret_hash, _secret_hash(secret)):
        return None
    user_id = None
    if row.sealed_user_id is not None:
        user_id = crypto.decrypt(_secret_key(secret), row.sealed_user_id, key_id.encode()).decode()
    return Principal(row.key_id, row.principal, user_id, row.expires_at, namespace=row.namespace)


def authenticate_token(store: EventStore, token: str, now: datetime) -> Principal | None:
    """``authenticate`` on the store's database, in a statement of its own."""
    with store.backend.statement_reads() as conn:
        return authenticate(conn, token, now)


#: Which keys a caller may see: those of one namespace, or every key (``ALL_NAMESPACES``).
ALL_NAMESPACES = None


def _in(namespace: str | None) -> sa.ColumnElement[bool]:
    return sa.true() if namespace is ALL_NAMESPACES else api_keys.c.namespace == namespace


def list_keys(conn: Connection, namespace: str | None) -> list[KeyInfo]:
    """The keys of ``namespace`` (every key for ``ALL_NAMESPACES``), oldest first."""
    query = sa.select(api_keys).where(_in(namespace))
    rows = conn.execute(query.order_by(api_keys.c.created_at, api_keys.c.key_id))
    return [_info(r) for r in rows]


def get_key(conn: Connection, key_id: str, namespace: str | None) -> KeyInfo | None:
    """Key ``key_id`` if it is one of ``namespace``'s (any key for ``ALL_NAMESPACES``)."""
    row = conn.execute(_KEY_BY_ID.where(_in(namespace)), {"key_id": key_id}).first()
    return None if row is None else _info(row)


def _info(row: sa.Row[Any]) -> KeyInfo:
    return KeyInfo(
        row.key_id,
        row.principal,
        row.subject_ref,
        row.created_at,
        row.revoked_at,
        row.expires_at,
        row.namespace,
    )


def revoke(conn: Connection, key_id: str, now: datetime, namespace: str | None) -> bool:
    """Revoke a key of ``namespace``; every ``VerifiedKeys`` of this process forgets it
    at once.  False when it is revoked already, unknown or another namespace's."""
    for cache in list(_caches):
        cache.revoked(key_id)
    result = conn.execute(
        api_keys.update()
        .where(api_keys.c.key_id == key_id, api_keys.c.revoked_at.is_(None), _in(namespace))
        .values(revoked_at=now)
    )
    return result.rowcount == 1


def revoke_user_keys(conn: Connection, subject_ref: str, now: datetime) -> int:
    """Revoke every user key bound to ``subject_ref`` (one user in one namespace), as
    ``revoke`` does one key; how many were still unrevoked."""
    query = (
        api_keys.update()
        .where(
            api_keys.c.principal == "user",
            api_keys.c.subject_ref == subject_ref,
            api_keys.c.revoked_at.is_(None),
        )
        .values(revoked_at=now)
        .returning(api_keys.c.key_id)
    )
    revoked = list(conn.execute(query).scalars())
    for key_id in revoked:
        for cache in list(_caches):
            cache.revoked(key_id)
    return len(revoked)


def count_active(conn: Connection, kind: str, now: datetime) -> int:
    """Keys of ``kind`` that authenticate at ``now``: neither revoked nor expired."""
    query = sa.select(sa.func.count()).where(
        api_keys.c.principal == kind,
        api_keys.c.revoked_at.is_(None),
        sa.or_(api_keys.c.expires_at.is_(None), api_keys.c.expires_at > now),
    )
    value: Any = conn.execute(query).scalar_one()
    return int(value)


#: Every live cache of verified keys in this process, told of revocations.
_caches: weakref.WeakSet[VerifiedKeys] = weakref.WeakSet()
MAX_CACHE_SECONDS = 2.0
MAX_CACHED_KEYS = 10_000


class VerifiedKeys:
    """Principals of recently verified tokens, kept for ``ttl`` seconds (0: off).

    A security trade-off, made explicit: a key revoked by another process
    (``oblivio keys revoke``) still authenticates here for up to ``ttl``
    seconds.  A revocation through ``revoke`` in this process takes effect at
    once, and for ``ttl`` seconds afterwards the key is not cached again, so a
    check that read the row just before the revocation committed cannot put
    it back.  Only successful checks are kept (a new key works at once, a
    wrong secret always reaches the database), under a hash of the token, so
    the cache holds no usable secret.
    """

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 <= ttl <= MAX_CACHE_SECONDS:
            raise InvalidInputError(f"the key cache keeps keys 0 to {MAX_CACHE_SECONDS:g} s")
        self.ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._verified: dict[bytes, tuple[float, Principal]] = {}
        self._revoked: dict[str, float] = {}  # key id -> until when it is not cached
        _caches.add(self)

    def lookup(self, token: str) -> Principal | None:
        """The cached principal of ``token``, or None (unknown, expired or off)."""
        if not self.ttl:
            return None
        entry = self._verified.get(_token_digest(token))
        if entry is None or entry[0] <= self._clock():
            return None
        return entry[1]

    def remember(self, token: str, principal: Principal) -> None:
        if not self.ttl:
            return
        now = self._clock()
        with self._lock:
            if self._revoked.get(principal.key_id, now) > now:
                return
            if len(self._verified) >= MAX_CACHED_KEYS:
                self._evict(now)
            self._verified[_token_digest(token)] = (now + self.ttl, principal)

    def revoked(self, key_id: str) -> None:
        """Forget ``key_id`` now and keep it out of the cache for ``ttl`` seconds."""
        if not self.ttl:
            return
        now = self._clock()
        with self._lock:
            self._revoked = {k: t for k, t in self._revoked.items() if t > now}
            self._revoked[key_id] = now + self.ttl
            self._verified = {d: e for d, e in self._verified.items() if e[1].key_id != key_id}

    def _evict(self, now: float) -> None:
        self._verified = {d: e for d, e in self._verified.items() if e[0] > now}
        if len(self._verified) >= MAX_CACHED_KEYS:
            self._verified.clear()


def _token_digest(token: str) -> bytes:
    return hashlib.sha256(b"oblivio/api-key/cache\0" + token.encode()).digest()
