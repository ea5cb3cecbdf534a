"""The data-protection officer's desk over HTTP, on both backends: look a person
up, act on their request with a reference, restrict, hold, and the register."""

from __future__ import annotations

import csv
import io

import pytest

from oblivio.memory import compliance, oversight
from oblivio.memory.oversight import AuditFilters
from tests.http.conftest import ALICE, ALSO_ON_CITUS, BOB, World, settled

TICKET = "TICKET-2026/0042"


def _post(world: World, path: str, principal: str = "operator", **body: object) -> object:
    return world.client.post(f"/v1/dpo/{path}", json=body, headers=world.headers(principal))


def _person(world: World, user: str = ALICE) -> dict[str, object]:
    response = _post(world, "people/lookup", user_id=user)
    assert response.status_code == 200, response.text
    found: dict[str, object] = response.json()
    return found


def _retrieve(world: World, user: str = ALICE) -> dict[str, object]:
    response = world.client.post(
        "/v1/retrieve", json={"query": "tea"}, headers=world.headers("user")
    )
    assert response.status_code == 200, response.text
    found: dict[str, object] = response.json()
    return found


def test_a_lookup_counts_current_memories_and_lists_requests(world: World) -> None:
    world.seed(ALICE, "Alice drinks green tea")
    world.seed(ALICE, "Alice plays the cello")
    person = _person(world)
    assert person["subject_ref"] == world.ctx.store.subject_ref(world.ctx.namespace, ALICE)
    assert person["holds_data"] is True
    assert sum(m["count"] for m in person["memories"]) >= 2
    assert person["restriction"] is None
    assert person["hold"] is None
    assert person["requests"] == []
    assert ALICE not in str(person)  # the raw id is never shown back


@ALSO_ON_CITUS
def test_an_access_request_is_served_recorded_and_audited(world: World) -> None:
    world.seed(ALICE, "Alice drinks green tea")
    response = _post(world, "people/export", user_id=ALICE, reference=TICKET)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["request"]["kind"] == "access"
    assert body["request"]["status"] == "completed"
    assert body["request"]["reference"] == TICKET
    compliance.verify_subject_export(body["export"], compliance.jwks(world.ctx))
    operator_key = world.tokens["operator"].split("_")[1]
    audit = oversight.audit_trail(
        world.ctx, filters=AuditFilters(action="subject.export", actor=operator_key)
    )
    assert audit.total == 1
    assert audit.entries[0]["entry"]["object_refs"]["reference"] == TICKET


@ALSO_ON_CITUS
def test_a_restricted_person_is_kept_exportable_but_not_used(world: World) -> None:
    world.seed(ALICE, "Alice drinks green tea")
    settled(world, ALICE)
    assert _retrieve(world)["results"]
    restricted = _post(
        world, "people/restrict", user_id=ALICE, ground="art18-1-a", reference=TICKET
    )
    assert restricted.status_code == 200, restricted.text
    assert _person(world)["restriction"]["ground"] == "art18-1-a"

    answer = _retrieve(world)
    assert answer["results"] == []
    assert answer["restricted"] is True
    write = world.client.post(
        "/v1/events", json={"content": "Alice now drinks coffee"}, headers=world.headers("user")
    )
    assert write.status_code == 409, write.text
    assert "restricted" in write.json()["detail"]
    exported = world.client.get(
        f"/v1/compliance/users/{ALICE}/export", headers=world.headers("user")
    )
    assert any("green tea" in str(e["data"]) for e in exported.json()["events"])

    lifted = _post(world, "people/lift-restriction", user_id=ALICE, reference=TICKET)
    assert lifted.status_code == 204, lifted.text
    assert _retrieve(world)["restricted"] is False
    assert _retrieve(world)["results"]
    actions = [
        e["entry"]["action"]
        for e in oversight.audit_trail(
            world.ctx, filters=AuditFilters(subject=_person(world)["subject_ref"])
        ).entries
    ]
    # Newest first; the person's own export while restricted is an access request too.
    assert actions[:3] == ["subject.lift_restriction", "subject.export", "subject.restrict"]


@ALSO_ON_CITUS
def test_a_held_person_is_not_erased_until_the_hold_is_lifted(world: World) -> None:
    world.seed(ALICE, "Alice drinks green tea")
    held = _post(world, "people/hold", user_id=ALICE, ground="art17-3-e", reference="CASE-7")
    assert held.status_code == 201, held.text

    refused = _post(world, "people/forget", user_id=ALICE, reference=TICKET, wait_seconds=0)
    assert refused.status_code == 409
    assert "art17-3-e" in refused.json()["detail"]
    by_user = world.client.post(
        f"/v1/compliance/users/{ALICE}/forget", headers=world.headers("user")
    )
    assert by_user.status_code == 409
    assert (
        world.client.post(
            "/v1/retrieve", json={"query": "tea"}, headers=world.headers("user")
        ).status_code
        == 200
    )

    register = world.client.get(
        "/v1/dpo/requests", params={"status": "refused"}, headers=world.headers("auditor")
    ).json()
    assert register["total"] == 2
    assert {r["outcome"] for r in register["requests"]} == {"refused:art17-3-e"}

    assert _post(world, "people/lift-hold", user_id=ALICE, reference="CASE-7").status_code == 204
    done = _post(world, "people/forget", user_id=ALICE, reference=TICKET, wait_seconds=30)
    assert done.status_code == 200, done.text
    certificate = done.json()["certificate"]
    compliance.verify_certificate(world.ctx, certificate)
    person = _person(world)
    erasure = next(r for r in person["requests"] if r["status"] == "completed")
    assert erasure["reference"] == TICKET
    assert erasure["outcome"] == "erased"
    assert erasure["certificate_id"] == done.json()["certificate_id"]


@ALSO_ON_CITUS
def test_a_restricted_person_can_be_forgotten_and_the_certificate_says_so(world: World) -> None:
    world.seed(ALICE)
    assert (
        _post(
            world, "people/restrict", user_id=ALICE, ground="art18-1-d", reference=TICKET
        ).status_code
        == 200
    )
    done = _post(world, "people/forget", user_id=ALICE, reference=TICKET, wait_seconds=30)
    assert done.status_code == 200, done.text
    claims = compliance.verify_certificate(world.ctx, done.json()["certificate"])
    assert claims["subject"]["restricted_when_erased"] is True
    assert _person(world)["restriction"] is None


def test_the_register_exports_as_csv_and_json_with_both_deadlines(world: World) -> None:
    world.seed(ALICE)
    _post(world, "people/export", user_id=ALICE, reference="LETTER-1")
    _post(world, "people/restrict", user_id=BOB, ground="art18-1-a", reference="LETTER-2")
    as_json = world.client.get("/v1/dpo/register", headers=world.headers("auditor"))
    assert as_json.status_code == 200
    requests = as_json.json()["requests"]
    assert {r["kind"] for r in requests} == {"access", "restriction"}
    for r in requests:
        assert r["legal_deadline_at"] > r["operational_deadline_at"]  # a month > 72 hours
    as_csv = world.client.get(
        "/v1/dpo/register",
        params={"format": "csv", "kind": "access"},
        headers=world.headers("auditor"),
    )
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert [r["reference"] for r in rows] == ["LETTER-1"]

    extended = world.client.post(
        f"/v1/dpo/requests/{rows[0]['request_id']}/extend",
        json={"reason": "complexity"},
        headers=world.headers("operator"),
    )
    assert extended.status_code == 200, extended.text
    assert extended.json()["legal_deadline_at"] > rows[0]["legal_deadline_at"]
    assert extended.json()["extension_reason"] == "complexity"


@pytest.mark.parametrize(
    "body",
    [
        {"user_id": ALICE, "reference": "a ticket with spaces"},
        {"user_id": ALICE, "reference": ""},
        {"user_id": ALICE, "reference": "x" * 65},
        {"user_id": ALICE},
    ],
)
def test_a_malformed_reference_is_refused_and_nothing_is_written(
    world: World, body: dict[str, object]
) -> None:
    response = world.client.post(
        "/v1/dpo/people/export", json=body, headers=world.headers("operator")
    )
    assert response.status_code == 422
    assert (
        world.client.get("/v1/dpo/register", headers=world.headers("auditor")).json()["requests"]
        == []
    )


def test_only_operators_act_and_auditors_read_the_register(world: World) -> None:
    for principal in ("user", "auditor"):
        response = _post(world, "people/lookup", principal, user_id=ALICE)
        assert response.status_code == 403
    assert world.client.get("/v1/dpo/requests", headers=world.headers("user")).status_code == 403


@ALSO_ON_CITUS
def test_every_subject_export_is_an_access_request_in_the_register(world: World) -> None:
    # Self-service (the person's own key) and an operator's key outside the desk:
    # Art. 15/20 requests served at once are still recorded, with what asked.
    world.seed(ALICE, "Alice drinks green tea")
    world.seed(BOB, "Bob rides a bike")
    own = world.client.get(f"/v1/compliance/users/{ALICE}/export", headers=world.headers("user"))
    assert own.status_code == 200, own.text
    theirs = world.client.get(
        f"/v1/compliance/users/{BOB}/export", headers=world.headers("operator")
    )
    assert theirs.status_code == 200, theirs.text
    compliance.verify_subject_export(own.json(), compliance.jwks(world.ctx))
    register = world.client.get(
        "/v1/dpo/requests", params={"kind": "access"}, headers=world.headers("auditor")
    ).json()
    assert register["total"] == 2
    assert sorted((r["reference"], r["status"]) for r in register["requests"]) == [
        ("api", "completed"),
        ("self-service", "completed"),
    ]
    assert [r["reference"] for r in _person(world, ALICE)["requests"]] == ["self-service"]
