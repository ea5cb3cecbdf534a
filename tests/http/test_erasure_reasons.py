"""Why an erasure happened, as the certificate records it.

A user key may only state that the user asked (``user_request``); any other
reason is 403 and nothing is erased.  An operator's reason is recorded as
given: a ``ttl_expired`` forget yields a certificate saying ``ttl_expired``.
"""

from __future__ import annotations

from typing import Any

from oblivio.memory import compliance
from tests.http.conftest import ALICE, BOB, Response, World, log_size
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


def test_a_user_may_only_give_the_reason_user_request(world: World) -> None:
    seed = world.seed(ALICE)
    before = log_size(world.ctx)
    for reason in [*sorted(REASONS - {"user_request"}), "made-up"]:
        forget = world.client.post(
            f"/v1/compliance/users/{ALICE}/forget",
            json={"reason": reason, "wait_seconds": 0},
            headers=world.headers("user"),
        )
        assert forget.status_code == 403, (reason, forget.text)
        delete = world.client.delete(
            f"/v1/compliance/users/{ALICE}/memory/{seed.event_id}",
            params={"reason": reason},
            headers=world.headers("user"),
        )
        assert delete.status_code == 403, (reason, delete.text)
    assert log_size(world.ctx) == before, "a refused erasure wrote to the store"
    kept = world.client.get(f"/v1/events/{seed.event_id}", headers=world.headers("user"))
    assert kept.status_code == 200, "a refused erasure erased the memory"

    response = world.client.post(
        f"/v1/compliance/users/{ALICE}/forget",
        json={"reason": "user_request", "wait_seconds": 30},
        headers=world.headers("user"),
    )
    claims = certificate_payload(world, response)
    assert claims["request"]["reason"] == "user_request"
    assert claims["request"]["legal_ground"] == "art17-1-b"


def test_an_operators_reason_is_recorded_as_given(world: World) -> None:
    world.seed(ALICE)
    response = world.client.post(
        f"/v1/compliance/users/{ALICE}/forget",
        json={"reason": "ttl_expired", "legal_ground": "art5-1-e", "wait_seconds": 30},
        headers=world.headers("operator"),
    )
    claims = certificate_payload(world, response)
    assert claims["request"]["reason"] == "ttl_expired"
    assert claims["request"]["legal_ground"] == "art5-1-e"
    assert claims["request"]["kind"] == "forget"

    seed = world.seed(BOB)
    deleted = world.client.delete(
        f"/v1/compliance/users/{BOB}/memory/{seed.event_id}",
        params={"reason": "correction", "wait_seconds": 30},
        headers=world.headers("operator"),
    )
    claims = certificate_payload(world, deleted)
    assert claims["request"]["kind"] == "delete_event"
    assert claims["request"]["reason"] == "correction"


def test_an_operator_cannot_invent_a_reason(world: World) -> None:
    world.seed(ALICE)
    before = log_size(world.ctx)
    response = world.client.post(
        f"/v1/compliance/users/{ALICE}/forget",
        json={"reason": "because", "wait_seconds": 0},
        headers=world.headers("operator"),
    )
    assert response.status_code == 422, response.text
    assert log_size(world.ctx) == before
