"""API keys managed over HTTP by operators: created (the token shown once),
listed without secrets, revoked, expired, and every change in the audit log."""

from __future__ import annotations

from datetime import timedelta

import pytest

from appdata import apikeys
from eventstore.errors import InvalidInputError
from oblivio.memory import api_keys
from tests.http.conftest import ALICE, World, log_size

KEYS = "/v1/admin/keys"


def audit_actions(world: World) -> list[dict[str, object]]:
    return [
        e.data or {} for e in world.ctx.store.read_audit() if e.type.startswith("audit.api_key.")
    ]


def test_an_operator_creates_lists_and_revokes_a_user_key(world: World) -> None:
    created = world.client.post(
        KEYS, json={"principal": "user", "user_id": ALICE}, headers=world.headers("operator")
    )
    assert created.status_code == 201, created.text
    body = created.json()
    token, key = body["token"], body["key"]
    assert token.startswith(f"obl_{key['key_id']}_")
    assert key["subject_ref"] == world.ctx.store.subject_ref(world.ctx.namespace, ALICE)
    assert key["revoked_at"] is None
    assert key["expires_at"] is None

    auth = {"Authorization": f"Bearer {token}"}
    world.seed(ALICE)
    assert world.client.get("/v1/events", headers=auth).status_code == 200

    listed = world.client.get(KEYS, headers=world.headers("operator"))
    assert listed.status_code == 200
    assert key in listed.json()
    secret = token.split("_", 2)[2]
    assert secret not in listed.text
    assert ALICE not in listed.text

    revoked = world.client.delete(f"{KEYS}/{key['key_id']}", headers=world.headers("operator"))
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_at"] is not None
    assert world.client.get("/v1/events", headers=auth).status_code == 401
    again = world.client.delete(f"{KEYS}/{key['key_id']}", headers=world.headers("operator"))
    assert again.status_code == 200
    assert again.json() == revoked.json()

    operator_key = world.tokens["operator"].split("_")[1]
    actor = world.ctx.store.codec.pseudonym("actor", f"api-key:{operator_key}")
    entries = audit_actions(world)
    assert [e["action"] for e in entries] == ["api_key.created", "api_key.revoked"]
    for entry in entries:
        assert entry["actor_ref"] == actor
        assert entry["subject_ref"] == key["subject_ref"]
        assert entry["object_refs"] == {"api_key": key["key_id"], "principal": "user"}


@pytest.mark.parametrize("principal", ["none", "bad", "user", "auditor"])
def test_only_operators_manage_keys(world: World, principal: str) -> None:
    before = log_size(world.ctx)
    target = world.tokens["auditor"].split("_")[1]
    calls = [
        world.client.post(KEYS, json={"principal": "operator"}, headers=world.headers(principal)),
        world.client.get(KEYS, headers=world.headers(principal)),
        world.client.delete(f"{KEYS}/{target}", headers=world.headers(principal)),
    ]
    expected = 401 if principal in ("none", "bad") else 403
    assert [c.status_code for c in calls] == [expected] * 3
    assert log_size(world.ctx) == before
    assert (
        world.client.get(
            "/v1/compliance/audit/export", headers=world.headers("auditor")
        ).status_code
        == 200
    )


def test_bad_key_requests_are_refused_and_write_nothing(sqlite_world: World) -> None:
    world = sqlite_world
    before = (log_size(world.ctx), len(api_keys.list_api_keys(world.ctx)))
    past = (world.ctx.clock() - timedelta(minutes=1)).isoformat()
    for bad in (
        {"principal": "root"},
        {"principal": "user"},  # a user key needs its user
        {"principal": "operator", "user_id": ALICE},
        {"principal": "user", "user_id": ""},
        {"principal": "auditor", "expires_at": "2030-01-01T00:00:00"},  # no time zone
        {"principal": "auditor", "note": "extra"},
    ):
        response = world.client.post(KEYS, json=bad, headers=world.headers("operator"))
        assert response.status_code == 422, (bad, response.text)
    assert (
        world.client.delete(
            f"{KEYS}/0123456789abcdef", headers=world.headers("operator")
        ).status_code
        == 404
    )
    assert (
        world.client.delete(f"{KEYS}/nothex", headers=world.headers("operator")).status_code == 422
    )
    assert (log_size(world.ctx), len(api_keys.list_api_keys(world.ctx))) == before
    # An expiry in the past makes a key that never authenticates.
    expired = world.client.post(
        KEYS, json={"principal": "auditor", "expires_at": past}, headers=world.headers("operator")
    )
    assert expired.status_code == 201
    auth = {"Authorization": f"Bearer {expired.json()['token']}"}
    assert world.client.get("/v1/compliance/audit/export", headers=auth).status_code == 401


def test_a_key_stops_authenticating_when_it_expires(world: World) -> None:
    now = world.ctx.clock()
    expires = now + timedelta(hours=1)
    created = world.client.post(
        KEYS,
        json={"principal": "auditor", "expires_at": expires.isoformat()},
        headers=world.headers("operator"),
    )
    assert created.status_code == 201, created.text
    assert created.json()["key"]["expires_at"] is not None
    auth = {"Authorization": f"Bearer {created.json()['token']}"}
    export = "/v1/compliance/audit/export"
    assert world.client.get(export, headers=auth).status_code == 200

    world.ctx.clock = lambda: expires + timedelta(seconds=1)
    refused = world.client.get(export, headers=auth)
    assert refused.status_code == 401
    assert "expired" in refused.json()["detail"]
    with world.ctx.store.reading() as view:
        assert apikeys.authenticate(view.connection, created.json()["token"], expires) is None


def test_the_application_operations_check_what_they_are_given(sqlite_world: World) -> None:
    ctx = sqlite_world.ctx
    with pytest.raises(InvalidInputError):
        api_keys.create_api_key(ctx, "user")
    with pytest.raises(InvalidInputError):
        api_keys.create_api_key(ctx, "auditor", expires_at=ctx.clock().replace(tzinfo=None))
    with pytest.raises(api_keys.ApiKeyUnavailableError):
        api_keys.revoke_api_key(ctx, "f" * 16)
    issued = api_keys.create_api_key(ctx, "auditor", actor_id="console:ops")
    assert issued.key in api_keys.list_api_keys(ctx)
    assert api_keys.revoke_api_key(ctx, issued.key.key_id).revoked_at is not None
