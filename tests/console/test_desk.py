"""The console's data-protection officer's desk without a browser: who may use it,
typed confirmations, references, and what each action leaves in the register."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from tests.console.conftest import console_client, csrf_of, sign_in
from tests.http.conftest import ALICE, World


def _operator(world: World) -> TestClient:
    client = console_client(world)
    assert sign_in(client, world.tokens["operator"]).status_code == 303
    return client


def _post(client: TestClient, path: str, **form: str) -> object:
    csrf = csrf_of(client, "/console/people")
    return client.post(f"/console/people{path}", data={"csrf": csrf, **form})


def test_only_operators_reach_the_desk_and_auditors_the_register(embedded_world: World) -> None:
    for principal, people, register in (("auditor", 403, 200), ("user", 403, 403)):
        client = console_client(embedded_world)
        sign_in(client, embedded_world.tokens[principal])
        assert client.get("/console/people").status_code == people
        assert client.get("/console/register").status_code == register
    refused = client.get("/console/people")
    assert 'id="back-home" href="/console/my"' in refused.text  # a way back
    assert "Sign out" in refused.text  # and out


def test_a_lookup_shows_the_person_by_reference_never_the_id(embedded_world: World) -> None:
    embedded_world.seed(ALICE, "Alice drinks green tea")
    client = _operator(embedded_world)
    page = _post(client, "", user_id=ALICE)
    assert page.status_code == 200
    ref = embedded_world.ctx.store.subject_ref(embedded_world.ctx.namespace, ALICE)
    assert f'<code id="subject-ref">{ref}</code>' in page.text
    assert re.search(r"<td>personal</td><td>\w+</td><td>1</td>", page.text)


def test_actions_need_the_typed_confirmation_and_a_reference(embedded_world: World) -> None:
    embedded_world.seed(ALICE)
    client = _operator(embedded_world)
    unconfirmed = _post(
        client, "/restrict", user_id=ALICE, ground="art18-1-a", reference="T-1", confirm="yes"
    )
    assert unconfirmed.status_code == 422
    assert "type “restrict” to confirm" in unconfirmed.text
    no_reference = _post(
        client, "/restrict", user_id=ALICE, ground="art18-1-a", reference="a b", confirm="restrict"
    )
    assert no_reference.status_code == 422
    assert 'data-restricted="false"' in no_reference.text  # nothing was written

    done = _post(
        client, "/restrict", user_id=ALICE, ground="art18-1-a", reference="T-1", confirm="restrict"
    )
    assert done.status_code == 200
    assert 'data-restricted="true"' in done.text
    assert 'data-kind="restriction" data-status="completed" data-reference="T-1"' in done.text


def test_a_held_persons_forget_is_refused_naming_the_ground(embedded_world: World) -> None:
    embedded_world.seed(ALICE)
    client = _operator(embedded_world)
    _post(client, "/hold", user_id=ALICE, ground="art17-3-e", reference="CASE-1", confirm="hold")
    refused = _post(client, "/forget", user_id=ALICE, reference="T-9", confirm="forget")
    assert refused.status_code == 409
    assert "art17-3-e" in refused.text
    assert 'data-kind="erasure" data-status="refused" data-reference="T-9"' in refused.text
    register = client.get("/console/register", params={"status": "refused"})
    assert "refused:art17-3-e" in register.text
    csv_export = client.get("/console/register/export", params={"format": "csv"})
    assert csv_export.headers["content-disposition"].startswith("attachment")
    assert "T-9" in csv_export.text


def test_a_requests_attempts_read_as_its_jobs_do(embedded_world: World) -> None:
    """The list shows the most attempts any one job made, of the limit ("1 / 5"), as the
    request's page shows each job: not the sum over its jobs."""
    embedded_world.certificate(ALICE)  # two projections' jobs, one attempt each
    client = _operator(embedded_world)
    listing = client.get("/console/requests").text
    assert re.search(r'<td class="attempts">1 / \d+</td>', listing)
    request_page = client.get(re.search(r'href="(/console/requests/[0-9a-f-]+)"', listing)[1])
    assert re.findall(r'<td class="job-attempts">(\d+) / \d+</td>', request_page.text) == ["1", "1"]
