"""Signing in to the console, on both backends: cookies, sessions held in the
database, CSRF, the limit on failed sign-ins, and the API's refusal of the
console cookie."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

import sqlalchemy as sa
from fastapi.testclient import TestClient

from appdata import tables
from oblivio.bootstrap import open_memory
from oblivio.http import create_app
from oblivio.http.throttle import FailedAuthThrottle
from oblivio.memory import api_keys, commands, queries
from tests.console.conftest import CSRF, console_client, csrf_of, sign_in
from tests.http.conftest import ALICE, World, revoke_key


def _signed_in(world: World, principal: str, base_url: str = "http://testserver") -> TestClient:
    client = console_client(world, base_url)
    response = sign_in(client, world.tokens[principal])
    assert response.status_code == 303, response.text
    return client


def test_the_session_cookie_is_httponly_strict_and_scoped_to_the_console(
    embedded_world: World,
) -> None:
    client = console_client(embedded_world)
    response = sign_in(client, embedded_world.tokens["operator"])
    assert response.status_code == 303
    assert response.headers["location"] == "/console"
    cookie = next(
        c for c in response.headers.get_list("set-cookie") if c.startswith("oblivio_console=")
    )
    attributes = {a.strip().lower() for a in cookie.split(";")[1:]}
    assert {"httponly", "path=/console", "samesite=strict"} <= attributes
    assert "secure" not in attributes  # plain HTTP: a Secure cookie would never come back

    over_tls = sign_in(
        console_client(embedded_world, "https://testserver"), embedded_world.tokens["operator"]
    )
    tls_cookie = next(
        c for c in over_tls.headers.get_list("set-cookie") if c.startswith("oblivio_console=")
    )
    assert "secure" in {a.strip().lower() for a in tls_cookie.split(";")[1:]}


def test_the_api_never_accepts_the_console_cookie(embedded_world: World) -> None:
    embedded_world.seed(ALICE)
    operator = _signed_in(embedded_world, "operator")
    assert operator.get("/console/audit").status_code == 200
    assert operator.get("/v1/compliance/audit/export").status_code == 401
    assert operator.get("/v1/events", params={"user_id": ALICE}).status_code == 401
    forget = operator.post(f"/v1/compliance/users/{ALICE}/forget", json={})
    assert forget.status_code == 401
    assert queries.get_events(embedded_world.ctx, user_id=ALICE)  # nothing was erased


def test_sessions_are_stored_hashed_with_the_user_id_sealed(world: World) -> None:
    user = _signed_in(world, "user")
    token = user.cookies["oblivio_console"]
    with world.ctx.store.backend.read_connection() as conn:
        rows = conn.execute(sa.select(tables.console_sessions)).all()
    assert len(rows) == 1
    row = rows[0]
    assert (
        row.session_hash == hashlib.sha256(b"oblivio/console/session\0" + token.encode()).digest()
    )
    assert token.encode() not in row.session_hash
    assert row.principal == "user"
    assert row.sealed_user_id is not None
    assert ALICE.encode() not in row.sealed_user_id


def test_a_session_holds_across_api_processes_sharing_the_database(world: World) -> None:
    user = _signed_in(world, "user")
    other_ctx = open_memory(world.settings)  # a second API process on the same store
    try:
        other = TestClient(create_app(other_ctx), raise_server_exceptions=False)
        other.cookies.set("oblivio_console", user.cookies["oblivio_console"])
        assert other.get("/console/my").status_code == 200
    finally:
        other_ctx.store.close()


def test_idle_sessions_end(world: World) -> None:
    operator = _signed_in(world, "operator")
    assert operator.get("/console/requests", follow_redirects=False).status_code == 200
    # Used within the timeout: the page view moves the last-seen time (a sliding timeout).
    earlier = world.ctx.clock() - timedelta(minutes=world.ctx.console_idle_minutes - 1)
    _set_last_seen(world, earlier)
    assert operator.get("/console/requests", follow_redirects=False).status_code == 200
    assert _last_seen(world) > earlier + timedelta(minutes=1)

    idle = world.ctx.clock() - timedelta(minutes=world.ctx.console_idle_minutes + 1)
    _set_last_seen(world, idle)
    response = operator.get("/console/requests", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/console/signin"
    with world.ctx.store.backend.read_connection() as conn:
        left = conn.execute(sa.select(sa.func.count()).select_from(tables.console_sessions))
        assert left.scalar_one() == 0


def _set_last_seen(world: World, when: datetime) -> None:
    with world.ctx.store.transaction() as tx:
        tx.connection.execute(tables.console_sessions.update().values(last_seen_at=when))


def _last_seen(world: World) -> datetime:
    with world.ctx.store.backend.read_connection() as conn:
        seen: datetime = conn.execute(
            sa.select(tables.console_sessions.c.last_seen_at)
        ).scalar_one()
    return seen


def test_revoking_the_api_key_ends_its_sessions(world: World) -> None:
    operator = _signed_in(world, "operator")
    revoke_key(world.ctx, world.tokens["operator"])
    response = operator.get("/console/requests", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/console/signin"


def test_a_key_that_expires_ends_its_sessions(world: World) -> None:
    issued = api_keys.create_api_key(
        world.ctx, "auditor", expires_at=world.ctx.clock() + timedelta(hours=1)
    )
    auditor = console_client(world)
    assert sign_in(auditor, issued.token).status_code == 303
    assert auditor.get("/console/audit", follow_redirects=False).status_code == 200
    with world.ctx.store.transaction() as tx:
        tx.connection.execute(
            tables.api_keys.update()
            .where(tables.api_keys.c.key_id == issued.key.key_id)
            .values(expires_at=world.ctx.clock() - timedelta(seconds=1))
        )
    response = auditor.get("/console/audit", follow_redirects=False)
    assert response.headers["location"] == "/console/signin"


def test_state_changing_forms_need_the_csrf_token(embedded_world: World) -> None:
    embedded_world.seed(ALICE)
    user = _signed_in(embedded_world, "user")
    wrong = user.post("/console/my/forget", data={"csrf": "0" * 64, "confirm": "forget me"})
    assert wrong.status_code == 403
    missing = user.post("/console/my/forget", data={"confirm": "forget me"})
    assert missing.status_code == 422
    signout = user.post("/console/signout", data={"csrf": "nope"})
    assert signout.status_code == 403
    assert queries.get_events(embedded_world.ctx, user_id=ALICE), "a forged form erased data"
    assert user.get("/console/my", follow_redirects=False).status_code == 200  # still signed in

    right = user.post(
        "/console/signout", data={"csrf": csrf_of(user, "/console/my")}, follow_redirects=False
    )
    assert right.status_code == 303
    assert user.get("/console/my", follow_redirects=False).status_code == 303


def test_the_sign_in_form_needs_its_own_nonce(embedded_world: World) -> None:
    client = console_client(embedded_world)
    response = client.post(
        "/console/signin", data={"api_key": embedded_world.tokens["operator"], "nonce": "made-up"}
    )
    assert response.status_code == 403
    assert "oblivio_console" not in client.cookies


def test_failed_sign_ins_are_rate_limited(embedded_world: World) -> None:
    client = console_client(embedded_world)
    limit = 3  # the suite's apps run without the throttle; this one gets the API's own
    client.app.state.auth_throttle = FailedAuthThrottle(limit)
    for _ in range(limit):
        assert sign_in(client, "obl_0000000000000000_wrong").status_code == 401
    blocked = sign_in(client, embedded_world.tokens["operator"])  # even the right key, for now
    assert blocked.status_code == 429
    assert int(blocked.headers["retry-after"]) > 0
    assert "oblivio_console" not in client.cookies
    # One budget per address: the API refuses this address too, for now.
    api = client.get("/v1/admin/keys", headers=embedded_world.headers("operator"))
    assert api.status_code == 429


def test_a_forget_from_the_console_is_audited_like_one_from_the_api(world: World) -> None:
    world.seed(ALICE)
    commands.store(world.ctx, "Bob plays chess", user_id="bob")
    user = _signed_in(world, "user")
    page = user.get("/console/my/forget")
    csrf = CSRF.search(page.text)
    assert csrf
    done = user.post(
        "/console/my/forget",
        data={"csrf": csrf.group(1), "confirm": "forget me"},
        follow_redirects=False,
    )
    assert done.status_code == 200
    assert 'id="session-ended"' in done.text  # the certificate page, as the last answer
    assert not queries.get_events(world.ctx, user_id=ALICE)
    api = world.client.post(
        "/v1/compliance/users/bob/forget",
        json={"wait_seconds": 10},
        headers=world.headers("other_user"),
    )
    assert api.status_code == 200

    export = world.client.get("/v1/compliance/audit/export", headers=world.headers("auditor"))
    lines = [json.loads(text) for text in export.text.splitlines()[:-1]]  # last: manifest
    forgets = [line["entry"] for line in lines if line["entry"]["action"] == "erasure.forget"]
    assert len(forgets) == 2
    by_console, by_api = forgets
    assert by_console.keys() == by_api.keys()
    pseudonym = world.ctx.store.codec.pseudonym
    for entry, principal in ((by_console, "user"), (by_api, "other_user")):
        key_id = world.tokens[principal].split("_")[1]
        assert entry["actor_ref"] == pseudonym("actor", f"api-key:{key_id}")
