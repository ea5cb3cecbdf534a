"""API keys as operators manage them: create (the secret shown once), list, revoke.

The HTTP operator routes, the console and the CLI call these functions.  Each
change is recorded in the audit stream in the same transaction as the key
row: who did it (a keyed hash of the actor), which key, which principal and,
for user keys, the pseudonymous subject, never the user id itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from eventstore import apikeys
from eventstore.apikeys import KeyInfo
from eventstore.audit import AuditEntry
from eventstore.errors import InvalidInputError, NotFoundError
from oblivio.memory import inputs
from oblivio.memory.context import MemoryContext

_KEY_ID = re.compile(r"[0-9a-f]{16}")


class ApiKeyUnavailableError(NotFoundError):
    """API key is not available."""


@dataclass(frozen=True)
class IssuedKey:
    """A new key: its description and its token, which is never shown again."""

    key: KeyInfo
    token: str


def create_api_key(
    ctx: MemoryContext,
    principal: str,
    *,
    user_id: str | None = None,
    expires_at: datetime | None = None,
    actor_id: str | None = None,
) -> IssuedKey:
    """Create a key for ``principal`` (user keys are bound to ``user_id``).

    ``expires_at`` (time zone-aware) ends the key's validity; one in the past makes a
    key that never authenticates.  ``actor_id`` names who asked, for the audit entry.
    """
    user = None if user_id is None else inputs.user(user_id)
    actor = inputs.optional_text(actor_id, "actor_id", inputs.MAX_ACTOR_ID_CHARS)
    ref = None if user is None else ctx.store.subject_ref(ctx.namespace, user)
    with ctx.store.transaction() as tx:
        info, token = apikeys.issue(tx.connection, principal, user, ref, ctx.clock(), expires_at)
        tx.append_audit(_entry(ctx, "api_key.created", info, actor))
    return IssuedKey(info, token)


def list_api_keys(ctx: MemoryContext) -> list[KeyInfo]:
    """Every key, oldest first: ids, principals, subjects, times; never secrets."""
    with ctx.store.reading() as view:
        return apikeys.list_keys(view.connection)


def revoke_api_key(ctx: MemoryContext, key_id: str, *, actor_id: str | None = None) -> KeyInfo:
    """Revoke ``key_id``; revoking a revoked key changes nothing and returns it as it is.

    Servers in other processes may accept the key for up to their key cache
    time (``OBLIVIO_API_KEY_CACHE_SECONDS``, at most 2 s); this process at once.
    """
    if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
        raise InvalidInputError("an API key id is 16 lowercase hex digits")
    actor = inputs.optional_text(actor_id, "actor_id", inputs.MAX_ACTOR_ID_CHARS)
    with ctx.store.transaction() as tx:
        if apikeys.revoke(tx.connection, key_id, ctx.clock()):
            info = apikeys.get_key(tx.connection, key_id)
            assert info is not None  # just revoked, in this transaction
            tx.append_audit(_entry(ctx, "api_key.revoked", info, actor))
            return info
        info = apikeys.get_key(tx.connection, key_id)
    if info is None:
        raise ApiKeyUnavailableError()
    return info


def _entry(ctx: MemoryContext, action: str, key: KeyInfo, actor: str | None) -> AuditEntry:
    return AuditEntry(
        action=action,
        subject_ref=key.subject_ref,
        actor_ref=None if actor is None else ctx.store.pseudonym("actor", actor),
        object_refs={"api_key": key.key_id, "principal": key.principal},
    )
