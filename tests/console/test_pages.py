"""What each principal sees on the console's pages, on both backends: the
same operations and rules as the API, nothing about other owners' ids."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from eventstore import schema
from eventstore.errors import InvalidInputError
from oblivio.memory import compliance, inputs, oversight, vector_rebuilds
from oblivio.memory.health import partition_lag
from tests.console.conftest import console_client, csrf_of, sign_in
from tests.http.conftest import ALICE, BOB, World, settled


def _signed_in(world: World, principal: str) -> TestClient:
    client = console_client(world)
    assert sign_in(client, world.tokens[principal]).status_code == 303
    return client


PAGES = (
    "/console/requests",
    "/console/audit",
    "/console/health",
    "/console/keys",
    "/console/my",
    "/console/verify",
)
ALLOWED = {
    "operator": {
        "/console/requests",
        "/console/audit",
        "/console/health",
        "/console/keys",
        "/console/verify",
    },
    "auditor": {"/console/requests", "/console/audit", "/console/health", "/console/verify"},
    "user": {"/console/requests", "/console/my", "/console/verify"},
}


@pytest.mark.parametrize("principal", sorted(ALLOWED))
def test_each_principal_reaches_its_pages_only(embedded_world: World, principal: str) -> None:
    embedded_world.seed(ALICE)
    client = _signed_in(embedded_world, principal)
    for path in PAGES:
        status = client.get(path, follow_redirects=False).status_code
        assert status == (200 if path in ALLOWED[principal] else 403), (principal, path)


def test_signed_out_pages_lead_to_sign_in(embedded_world: World) -> None:
    client = console_client(embedded_world)
    for path in (*PAGES, f"/console/requests/{uuid.uuid4()}"):
        response = client.get(path, follow_redirects=False)
        assert response.status_code == 303
        assert response.headers["location"] == "/console/signin"


def test_an_auditor_sees_no_memory_content(embedded_world: World) -> None:
    embedded_world.seed(ALICE, "Alice keeps her diary in the blue drawer")
    embedded_world.certificate(ALICE)
    auditor = _signed_in(embedded_world, "auditor")
    for path in ("/console/requests", "/console/audit", "/console/health", "/console/audit/export"):
        assert "blue drawer" not in auditor.get(path).text
    assert auditor.get("/console/my/export").status_code == 403


def test_a_user_sees_only_their_own_requests(world: World) -> None:
    mine = world.erasure_request(ALICE)
    theirs = world.erasure_request(BOB)
    listing = _signed_in(world, "user").get("/console/requests").text
    assert str(mine) in listing
    assert str(theirs) not in listing
    everyone = _signed_in(world, "operator").get("/console/requests").text
    assert str(mine) in everyone
    assert str(theirs) in everyone


def test_no_page_reveals_whether_another_owners_id_exists(world: World) -> None:
    request_id = world.erasure_request(BOB)
    certificate_id = world.certificate(BOB)
    user = _signed_in(world, "user")
    for kind, existing in (("requests", request_id), ("certificates", certificate_id)):
        foreign = user.get(f"/console/{kind}/{existing}")
        missing = user.get(f"/console/{kind}/{uuid.uuid4()}")
        assert foreign.status_code == missing.status_code == 404
        assert foreign.text == missing.text
    foreign_progress = user.get(f"/console/requests/{request_id}/progress")
    assert foreign_progress.status_code == 404
    operator = _signed_in(world, "operator")
    assert operator.get(f"/console/certificates/{certificate_id}").status_code == 200


def test_requests_filter_and_highlight_overdue_ones(world: World) -> None:
    world.certificate(ALICE)
    open_request = world.erasure_request(ALICE)  # its jobs wait: no worker runs here
    with world.ctx.store.transaction() as tx:
        tx.connection.execute(
            schema.erasure_requests.update()
            .where(schema.erasure_requests.c.request_id == open_request)
            .values(deadline_at=world.ctx.clock() - timedelta(hours=1))
        )
    operator = _signed_in(world, "operator")
    overdue = operator.get("/console/requests", params={"overdue": "true"}).text
    assert _listed(overdue) == [("rebuilding", True)]
    assert str(open_request) in overdue
    completed = operator.get("/console/requests", params={"status": "completed"}).text
    assert _listed(completed) == [("completed", False)]
    assert operator.get("/console/requests", params={"status": "bogus"}).status_code == 422
    assert operator.get("/console/requests", params={"page": "0"}).status_code == 422


def _listed(html: str) -> list[tuple[str, bool]]:
    rows = re.findall(r'<tr class="(overdue|)" data-status="(\w+)">', html)
    return [(status, css == "overdue") for css, status in rows]


def test_requests_page_through_newest_first(world: World) -> None:
    made = [world.erasure_request(ALICE) for _ in range(3)]
    first = oversight.list_erasure_requests(world.ctx, page=1, per_page=2)
    second = oversight.list_erasure_requests(world.ctx, page=2, per_page=2)
    assert first.total == second.total == 3
    assert first.pages == 2
    listed = [r.request_id for r in first.requests + second.requests]
    assert sorted(listed) == sorted(made)
    received = [r.received_at for r in first.requests + second.requests]
    assert received == sorted(received, reverse=True)
    assert oversight.list_erasure_requests(world.ctx, user_id=BOB).total == 0
    with pytest.raises(InvalidInputError):
        oversight.list_erasure_requests(world.ctx, per_page=inputs.MAX_PAGE_SIZE + 1)


def test_a_request_page_follows_its_rebuild_jobs(world: World) -> None:
    request_id = world.erasure_request(ALICE)
    user = _signed_in(world, "user")
    page = user.get(f"/console/requests/{request_id}").text
    assert 'id="no-certificate"' in page
    assert 'data-done="false"' in page
    progress = user.get(f"/console/requests/{request_id}/progress").json()
    assert progress["done"] is False
    assert {job["status"] for job in progress["jobs"]} == {"queued"}

    while world.ctx.rebuilder.run_once():
        pass
    progress = user.get(f"/console/requests/{request_id}/progress").json()
    assert progress == {**progress, "done": True, "status": "completed"}
    assert {job["status"] for job in progress["jobs"]} == {"done"}
    status = compliance.erasure_status(world.ctx, request_id)
    page = user.get(f"/console/requests/{request_id}").text
    assert f'href="/console/certificates/{status.certificate_id}"' in page


def test_health_shows_lag_jobs_and_the_time_to_certificate_chart(world: World) -> None:
    world.certificate(ALICE)
    world.seed(BOB)  # not yet applied by the vector state: no worker runs here
    settled(world, BOB)  # the lag counts what readers of the log may see
    html = _signed_in(world, "operator").get("/console/health").text
    rows = re.findall(
        r'<tr class="(behind|)" data-consumer="(\w+)"><td>\w+</td><td>(\d+)</td><td>(\d+)</td>',
        html,
    )
    lag: dict[str, list[int]] = {}
    for css, consumer, _, pending in rows:
        lag.setdefault(consumer, []).append(int(pending))
        assert (css == "behind") == (int(pending) > 0)
    assert set(lag) == {"vector_state", "claims_extraction", "likely_updates"}
    assert all(len(p) == world.settings.partitions for p in lag.values())
    assert sum(lag["vector_state"]) >= 1  # Bob's memory
    assert lag == partition_lag(world.ctx)
    assert html.count('class="bar"') == 1  # one day with certified requests
    assert "1 request(s) certified" in html
    figures = oversight.time_to_certificate(world.ctx, days=3)
    assert [f.certified for f in figures] == [0, 0, 1]
    assert 'data-status="done"' in html  # the certified request's jobs


def test_health_lists_re_embedding_jobs_with_their_progress(world: World) -> None:
    html = _signed_in(world, "auditor").get("/console/health").text
    assert "No re-embedding jobs yet." in html
    world.seed(ALICE)
    started = vector_rebuilds.start_vector_rebuild(world.ctx, user_id=ALICE, actor_id="ops")
    assert vector_rebuilds.recent_vector_rebuilds(world.ctx) == [started]
    for principal in ("operator", "auditor"):
        html = _signed_in(world, principal).get("/console/health").text
        row = re.search(
            rf'<tr data-status="(\w+)" data-rebuild="{started.rebuild_id}">(.*?)</tr>',
            html,
            re.S,
        )
        assert row is not None, principal
        cells = re.findall(r"<td>(?:<span[^>]*>)?(.*?)(?:</span>)?</td>", row.group(2))
        assert row.group(1) == started.status == "running"
        assert cells[1:6] == [
            started.embedder,
            "subject",
            "running",
            f"0 / {started.subjects_total}",
            f"0 / {started.nodes_total}",
        ]
        assert started.subjects_total == 1
        assert "No re-embedding jobs yet." not in html


def test_the_audit_page_shows_the_chain_state_and_offers_the_signed_export(world: World) -> None:
    world.certificate(ALICE)
    auditor = _signed_in(world, "auditor")
    assert 'id="chain-state"' not in auditor.get("/console/audit").text  # on demand only
    html = auditor.get("/console/audit", params={"verify_log": "true", "check_chain": "true"}).text
    assert 'id="chain-state" data-state="valid"' in html
    assert 'id="log-state" data-state="valid"' in html
    assert "erasure.delete_event" in html
    assert "erasure.certified" in html
    export = auditor.get("/console/audit/export")
    assert export.headers["content-disposition"].startswith("attachment")
    manifest = compliance.verify_audit_export(export.text, compliance.jwks(world.ctx))
    assert manifest["count"] == len(export.text.splitlines()) - 1


def test_my_export_is_the_signed_subject_export(embedded_world: World) -> None:
    embedded_world.seed(ALICE, "Alice collects stamps")
    user = _signed_in(embedded_world, "user")
    page = user.get("/console/my").text
    assert "Alice collects stamps" in page
    export = user.get("/console/my/export")
    assert export.headers["content-disposition"].startswith("attachment")
    exported = export.json()
    manifest = compliance.verify_subject_export(exported, compliance.jwks(embedded_world.ctx))
    assert manifest["counts"]["events"] == 1


def test_forgetting_needs_the_typed_confirmation(embedded_world: World) -> None:
    embedded_world.seed(ALICE)
    user = _signed_in(embedded_world, "user")
    form = user.get("/console/my/forget").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf
    response = user.post("/console/my/forget", data={"csrf": csrf.group(1), "confirm": "yes"})
    assert response.status_code == 422
    assert oversight.list_erasure_requests(embedded_world.ctx).total == 0


def test_a_console_forget_shows_its_certificate_and_ends_the_session(
    embedded_world: World,
) -> None:
    user = _signed_in(embedded_world, "user")  # Alice, of whom the store holds nothing
    page = user.post(
        "/console/my/forget",
        data={"csrf": csrf_of(user, "/console/my/forget"), "confirm": "forget me"},
    )
    assert page.status_code == 200
    assert 'id="no-data-held"' in page.text  # not to be mistaken for a real erasure
    assert 'id="api-keys-revoked">1 revoked.' in page.text
    assert 'id="session-ended"' in page.text
    assert 'class="signout"' not in page.text  # no navigation for a session that ended
    later = user.get("/console/my", follow_redirects=False)
    assert (later.status_code, later.headers["location"]) == (303, "/console/signin")


def test_a_console_forget_not_certified_within_its_wait_gives_the_request_id(
    embedded_world: World,
) -> None:
    """The page a self-forget answers with when the certificate is still to come."""
    from oblivio.console.web import environment

    status = compliance.forget(embedded_world.ctx, ALICE, wait=False)
    page = environment.get_template("forgotten.html").render(
        who=None, nav=[], csrf="", path="/console/my/forget", status=status
    )
    assert f'<code id="request-id">{status.request_id}</code>' in page
    assert 'id="session-ended"' in page


def test_pages_forbid_framing_and_foreign_sources(embedded_world: World) -> None:
    response = console_client(embedded_world).get("/console/signin")
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert response.headers["cache-control"] == "no-store"


def test_operators_create_and_revoke_keys_through_the_audited_operations(world: World) -> None:
    operator = _signed_in(world, "operator")
    csrf = csrf_of(operator, "/console/keys")
    created = operator.post(
        "/console/keys", data={"csrf": csrf, "principal": "user", "user_id": "carol"}
    )
    assert created.status_code == 200
    token = re.search(r'<code id="new-token">(obl_[^<]+)</code>', created.text)
    assert token, "the new key's token is shown once"
    key_id = token.group(1).split("_")[1]
    carol = world.client.get("/v1/nodes", headers={"Authorization": f"Bearer {token.group(1)}"})
    assert carol.status_code == 200  # a working key for carol
    listing = operator.get("/console/keys").text
    assert f'data-key="{key_id}" data-state="active"' in listing
    assert token.group(1) not in listing  # never shown again

    revoked = operator.post(
        f"/console/keys/{key_id}/revoke", data={"csrf": csrf}, follow_redirects=False
    )
    assert revoked.status_code == 303
    assert f'data-key="{key_id}" data-state="revoked"' in operator.get("/console/keys").text
    again = world.client.get("/v1/nodes", headers={"Authorization": f"Bearer {token.group(1)}"})
    assert again.status_code == 401

    trail = oversight.audit_trail(world.ctx)
    actions = [
        (e["entry"]["action"], e["entry"]["object_refs"].get("api_key")) for e in trail.entries
    ]
    assert ("api_key.created", key_id) in actions
    assert ("api_key.revoked", key_id) in actions
    operator_key = world.tokens["operator"].split("_")[1]
    actor = world.ctx.store.codec.pseudonym("actor", f"api-key:{operator_key}")
    assert {e["entry"]["actor_ref"] for e in trail.entries[:2]} == {actor}


def test_key_forms_need_csrf_an_operator_and_valid_input(embedded_world: World) -> None:
    operator = _signed_in(embedded_world, "operator")
    forged = operator.post("/console/keys", data={"csrf": "x", "principal": "operator"})
    assert forged.status_code == 403
    csrf = csrf_of(operator, "/console/keys")
    bad = operator.post("/console/keys", data={"csrf": csrf, "principal": "root"})
    assert bad.status_code == 422
    no_user = operator.post("/console/keys", data={"csrf": csrf, "principal": "user"})
    assert no_user.status_code == 422
    malformed = operator.post(
        "/console/keys",
        data={"csrf": csrf, "principal": "auditor", "expires_at": "next tuesday"},
    )
    assert malformed.status_code == 422
    unknown = operator.post("/console/keys/0123456789abcdef/revoke", data={"csrf": csrf})
    assert unknown.status_code == 404
    keys_before = len(oversight.audit_trail(embedded_world.ctx).entries)
    auditor = _signed_in(embedded_world, "auditor")
    refused = auditor.post(
        "/console/keys", data={"csrf": csrf_of(auditor, "/console/audit"), "principal": "operator"}
    )
    assert refused.status_code == 403
    assert len(oversight.audit_trail(embedded_world.ctx).entries) == keys_before
