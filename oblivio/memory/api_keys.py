"""API keys as operators manage them: create (the secret shown once), list, revoke.

The HTTP operator routes, the console and the CLI call these functions.  Each
change is recorded in the audit stream in the same transaction as the key
row: who did it (a keyed hash of the actor), which key, which principal, its
namespace and, for user keys, the pseudonymous subject, never the user id itself.

A key belongs to the namespace of the context that creates it; only an
explicit ``cluster_wide=True`` operator key belongs to none.  A namespaced
caller sees and revokes only its namespace's keys: another namespace's key id
answers exactly like an unknown one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from appdata import apikeys
from appdata.apikeys import KeyInfo
from eventstore import EventStore
from eventstore.audit import AuditEntry
from eventstore.errors import InvalidInputError, NotFoundError
from oblivio.memory import inputs

_KEY_ID = re.compile(r"[0-9a-f]{16}")


class ApiKeyUnavailableError(NotFoundError):
    """API key is not available."""


class KeyHost(Protocol):
    """What key management needs of a context: the log, the tenant, the clock, and
    whether the caller sees every namespace (``MemoryContext`` is one)."""

    @property
    def store(self) -> EventStore: ...
    @property
    def namespace(self) -> str: ...
    @property
    def clock(self) -> Callable[[], datetime]: ...
    @property
    def cluster_wide(self) -> bool: ...


@dataclass(frozen=True)
class IssuedKey:
    """A new key: its description and its token, which is never shown again."""

    key: KeyInfo
    token: str


def create_api_key(
    ctx: KeyHost,
    principal: str,
    *,
    user_id: str | None = None,
    expires_at: datetime | None = None,
    actor_id: str | None = None,
    cluster_wide: bool = False,
) -> IssuedKey:
    """Create a key for ``principal`` in the context's namespace (user keys are bound
    to ``user_id``); ``cluster_wide=True`` makes an operator key of no namespace,
    which serves every one (only a cluster-wide caller may make one).

    ``expires_at`` (time zone-aware) ends the key's validity; one in the past makes a
    key that never authenticates.  ``actor_id`` names who asked, for the audit entry.
    """
    user = None if user_id is None else inputs.user(user_id)
    actor = inputs.optional_text(actor_id, "actor_id", inputs.MAX_ACTOR_ID_CHARS)
    if not isinstance(cluster_wide, bool):
        raise InvalidInputError("cluster_wide must be true or false")
    if cluster_wide and not ctx.cluster_wide:
        raise InvalidInputError("only a cluster-wide caller may create a cluster-wide key")
    ref = None if user is None else ctx.store.subject_ref(ctx.namespace, user)
    namespace = None if cluster_wide else ctx.namespace
    with ctx.store.transaction() as tx:
        info, token = apikeys.issue(
            tx.connection, principal, user, ref, ctx.clock(), expires_at, namespace=namespace
        )
        tx.append_audit(_entry(ctx, "api_key.created", info, actor))
    return IssuedKey(info, token)


def _visible_namespace(ctx: KeyHost) -> str | None:
    return apikeys.ALL_NAMESPACES if ctx.cluster_wide else ctx.namespace


def list_api_keys(ctx: KeyHost) -> list[KeyInfo]:
    """The keys the caller may see (its namespace's, or all for a cluster-wide caller),
    oldest first: ids, principals, namespaces, subjects, times; never secrets."""
    with ctx.store.reading() as view:
        return apikeys.list_keys(view.connection, _visible_namespace(ctx))


def revoke_api_key(ctx: KeyHost, key_id: str, *, actor_id: str | None = None) -> KeyInfo:
    """Revoke ``key_id``; revoking a revoked key changes nothing and returns it as it is.

    Servers in other processes may accept the key for up to their key cache
    time (``OBLIVIO_API_KEY_CACHE_SECONDS``, at most 2 s); this process at once.
    """
    if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
        raise InvalidInputError("an API key id is 16 lowercase hex digits")
    actor = inputs.optional_text(actor_id, "actor_id", inputs.MAX_ACTOR_ID_CHARS)
    visible = _visible_namespace(ctx)
    with ctx.store.transaction() as tx:
        if apikeys.revoke(tx.connection, key_id, ctx.clock(), visible):
            info = apikeys.get_key(tx.connection, key_id, visible)
            assert info is not None  # just revoked, in this transaction
            tx.append_audit(_entry(ctx, "api_key.revoked", info, actor))
            return info
        info = apikeys.get_key(tx.connection, key_id, visible)
    if info is None:
        raise ApiKeyUnavailableError()
    return info


def _entry(ctx: KeyHost, action: str, key: KeyInfo, actor: str | None) -> AuditEntry:
    scope = {"scope": "cluster-wide"} if key.namespace is None else {}
    return AuditEntry(
        action=action,
        namespace=key.namespace,
        subject_ref=key.subject_ref,
        actor_ref=None if actor is None else ctx.store.pseudonym("actor", actor),
        object_refs={"api_key": key.key_id, "principal": key.principal, **scope},
    )
