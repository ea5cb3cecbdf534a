"""Operator routes for API keys: create (the token shown once), list, revoke.

A namespaced operator manages its namespace's keys; a cluster-wide one every key.
"""

from __future__ import annotations

from fastapi import HTTPException

from oblivio.http import schemas as s
from oblivio.http.auth import Operator, acting_actor
from oblivio.http.errors import api_router
from oblivio.memory import api_keys

router = api_router("/v1/admin/keys", "keys", (401, 403, 404, 422, 429, 503))


@router.post("", status_code=201, response_model=s.IssuedKeyOut)
def create_key(body: s.KeyRequest, caller: Operator) -> s.IssuedKeyOut:
    """Create an API key in the caller's namespace (or, from a cluster-wide key, a
    cluster-wide one); the token is in this response only and never shown again."""
    if body.cluster_wide and caller.who.namespace is not None:
        raise HTTPException(403, "only a cluster-wide key may create a cluster-wide key")
    issued = api_keys.create_api_key(
        caller.ctx,
        body.principal,
        user_id=body.user_id,
        expires_at=body.expires_at,
        actor_id=acting_actor(caller.who),
        cluster_wide=body.cluster_wide,
    )
    return s.IssuedKeyOut(key=s.KeyOut.of(issued.key), token=issued.token)


@router.get("", response_model=list[s.KeyOut])
def list_keys(caller: Operator) -> list[s.KeyOut]:
    """The namespace's API keys (every key for a cluster-wide key), oldest first (ids,
    principals, namespaces, pseudonymous subjects; never secrets)."""
    return [s.KeyOut.of(k) for k in api_keys.list_api_keys(caller.ctx)]


@router.delete("/{key_id}", response_model=s.KeyOut)
def revoke_key(key_id: s.KeyId, caller: Operator) -> s.KeyOut:
    """Revoke an API key; revoking it again changes nothing."""
    return s.KeyOut.of(
        api_keys.revoke_api_key(caller.ctx, key_id, actor_id=acting_actor(caller.who))
    )
