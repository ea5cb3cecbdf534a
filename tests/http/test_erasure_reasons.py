"""Why an erasure happened and who asked, as the certificate records it.

A forget over HTTP is recorded as ``user_request``, for every principal (other
reasons come only from the Python API and the CLI): a body that states another
reason is refused (403, nothing erased), never recorded as something it did not
say.  Deleting one event: a user key may only state that the user asked (any
other reason is 403 and nothing is erased); an operator's reason is recorded as
given.  Both record the requesting key as a keyed hash.
"""

from __future__ import annotations

from typing import Any

import pytest

from oblivio.memory import compliance
from tests.http.conftest import ALICE, ALSO_ON_CITUS, BOB, Response, World, log_size
from workers.policy import REASONS


def certificate_payload(world: World, response: Response) -> dict[str, Any]:
    """The verified claims of the certificate a completed erasure answered with."""
    assert response.status_code == 200, response.text[:300]
    body = response.json()
    assert body["status"] == "completed", body
    stored = world.client.get(
        f"/v1/compliance/certificates/{body['certificate_id']}",
        headers=world.headers("operator"),
    )
    assert stored.status_code == 200
    assert stored.json() == body["certificate"]
    return compliance.verify_certificate(world.ctx, body["certificate"])


@ALSO_ON_CITUS
def test_a_user_may_only_give_the_reason_user_request_for_one_event(world: World) -> None:
    seed = world.seed(ALICE)
    before = log_size(world.ctx)
    for reason in sorted(REASONS - {"user_request"}):
        delete = world.client.delete(
            f"/v1/compliance/users/{ALICE}/memory/{seed.event_id}",
            params={"reason": reason},
            headers=world.headers("user"),
        )
        assert delete.status_code == 403, (reason, delete.text)
    assert log_size(world.ctx) == before, "a refused erasure wrote to the store"
    kept = world.client.get(f"/v1/events/{seed.event_id}", headers=world.headers("user"))
    assert kept.status_code == 200, "a refused erasure erased the memory"


@pytest.mark.parametrize(
    ("principal", "user", "reason"),
    [
        ("user", ALICE, "user_request"),
        ("user", ALICE, None),
        ("operator", BOB, "user_request"),
        ("operator", BOB, None),
    ],
)
def test_a_forget_over_http_is_recorded_as_user_request(
    world: World, principal: str, user: str, reason: str | None
) -> None:
    world.seed(user)
    body: dict[str, Any] = {"wait_seconds": 30, "legal_ground": "art17-1-c"}
    if reason is not None:
        body["reason"] = reason
    response = world.client.post(
        f"/v1/compliance/users/{user}/forget", json=body, headers=world.headers(principal)
    )
    claims = certificate_payload(world, response)
    assert claims["request"]["reason"] == "user_request"
    assert claims["request"]["legal_ground"] == "art17-1-c"
    assert claims["request"]["kind"] == "forget"


@ALSO_ON_CITUS
@pytest.mark.parametrize("principal", ["user", "operator"])
def test_a_forget_stating_another_reason_is_refused(world: World, principal: str) -> None:
    """The reason is not silently replaced: stated, it is user_request or the forget is
    refused, and nothing is erased.  Outside the vocabulary it is malformed (422)."""
    world.seed(ALICE)
    before = log_size(world.ctx)
    forget = f"/v1/compliance/users/{ALICE}/forget"
    for reason in [*sorted(REASONS - {"user_request"}), "an operator's own words"]:
        response = world.client.post(
            forget, json={"reason": reason, "wait_seconds": 0}, headers=world.headers(principal)
        )
        expected = 403 if reason in REASONS else 422
        assert response.status_code == expected, (reason, response.text)
    assert log_size(world.ctx) == before, "a refused forget wrote to the store"
    kept = world.client.get(
        "/v1/events", params={"user_id": ALICE}, headers=world.headers("operator")
    )
    assert kept.status_code == 200
    assert kept.json(), "a refused forget erased the memories"


def test_an_operators_reason_for_one_event_is_recorded_as_given(world: World) -> None:
    seed = world.seed(BOB)
    deleted = world.client.delete(
        f"/v1/compliance/users/{BOB}/memory/{seed.event_id}",
        params={"reason": "correction", "wait_seconds": 30},
        headers=world.headers("operator"),
    )
    claims = certificate_payload(world, deleted)
    assert claims["request"]["kind"] == "delete_event"
    assert claims["request"]["reason"] == "correction"


@ALSO_ON_CITUS
@pytest.mark.parametrize("principal", ["user", "operator"])
def test_both_erasures_record_the_requesting_key(world: World, principal: str) -> None:
    key_id = world.tokens[principal].split("_")[1]
    expected = world.ctx.store.codec.pseudonym("actor", f"api-key:{key_id}")
    seed = world.seed(ALICE)
    deleted = world.client.delete(
        f"/v1/compliance/users/{ALICE}/memory/{seed.event_id}",
        params={"wait_seconds": 30},
        headers=world.headers(principal),
    )
    forgotten = world.client.post(
        f"/v1/compliance/users/{ALICE}/forget",
        json={"wait_seconds": 30},
        headers=world.headers(principal),
    )
    for response in (deleted, forgotten):
        claims = certificate_payload(world, response)
        assert claims["request"]["requested_by"] == expected, claims["request"]
    entries = [
        e.data or {}
        for e in world.ctx.store.read_audit()
        if e.type in ("audit.erasure.delete_event", "audit.erasure.forget")
    ]
    assert [e["actor_ref"] for e in entries] == [expected, expected]


def test_an_operator_cannot_invent_a_reason_for_one_event(world: World) -> None:
    seed = world.seed(ALICE)
    before = log_size(world.ctx)
    response = world.client.delete(
        f"/v1/compliance/users/{ALICE}/memory/{seed.event_id}",
        params={"reason": "because"},
        headers=world.headers("operator"),
    )
    assert response.status_code == 422, response.text
    assert log_size(world.ctx) == before
