"""The main flow of the HTTP API, driven over a real socket by ``httpx``.

One function walks store → read → correct → reinforce → retrieve → triggers
and attractors → delete one event → forget (waited and not waited) →
certificate → JWKS (verified with jwcrypto) → exports → health, asserting the
contract at every step.  The live-server tests run it against uvicorn in a
thread and against ``oblivio serve`` in a subprocess, on both backends.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from jwcrypto import jwk, jws
from jwcrypto.common import JWException, base64url_decode

from certificates import CERTIFICATE_TYP
from oblivio.memory.compliance import verify_audit_export, verify_subject_export

STATUS_TIMEOUT = 30.0
REINFORCE_FIELDS = ("confidence_base", "salience_base", "reinforcement_boost", "last_reinforced_at")


@dataclass(frozen=True)
class FlowKeys:
    alice: str
    bob: str
    operator: str
    auditor: str


@dataclass(frozen=True)
class Stored:
    event_id: str
    node_id: str


def auth(token: str, **extra: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **extra}


def expect(response: httpx.Response, status: int) -> Any:
    """The JSON body of ``response`` after checking its status (shown on failure)."""
    assert response.status_code == status, (
        f"{response.request.method} {response.request.url} answered "
        f"{response.status_code}, expected {status}: {response.text[:500]}"
    )
    if status == 204 or not response.content:
        return None
    if response.headers["content-type"].startswith("application/x-ndjson"):
        return response.text
    return response.json()


def store(http: httpx.Client, token: str, content: str) -> Stored:
    body = expect(http.post("/v1/events", json={"content": content}, headers=auth(token)), 201)
    assert len(body["node_ids"]) >= 1
    return Stored(body["event_id"], body["node_ids"][0])


def verify_with_jwcrypto(document: dict[str, Any], jwks: dict[str, Any]) -> dict[str, Any]:
    """Check a JWS (JSON serialization) against the published JWKS with jwcrypto."""
    keyset = jwk.JWKSet.from_json(json.dumps(jwks))
    token = jws.JWS()
    token.deserialize(json.dumps(document))
    header = token.jose_header
    assert header["alg"] == "Ed25519"
    key = keyset.get_key(header["kid"])
    assert key is not None, f"kid {header['kid']} is not in the JWKS"
    token.verify(key, alg="Ed25519")
    payload: dict[str, Any] = json.loads(token.payload)
    return payload


def tampered(document: dict[str, Any]) -> dict[str, Any]:
    """The same JWS with one character of the signature changed."""
    signature = document["signature"]
    flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
    return {**document, "signature": flipped}


def wait_for_completion(http: httpx.Client, token: str, status_url: str) -> dict[str, Any]:
    """Poll an erasure status URL until the request completes."""
    deadline = time.monotonic() + STATUS_TIMEOUT
    while True:
        status: dict[str, Any] = expect(http.get(status_url, headers=auth(token)), 200)
        if status["status"] == "completed":
            return status
        assert status["status"] != "failed", status
        assert time.monotonic() < deadline, f"erasure still {status['status']}: {status}"
        time.sleep(0.1)


def run_main_flow(http: httpx.Client, keys: FlowKeys, backend: str) -> None:
    alice, bob = keys.alice, keys.bob
    unauthenticated = http.get("/v1/events")
    expect(unauthenticated, 401)
    assert unauthenticated.headers["www-authenticate"] == "Bearer"
    expect(http.get("/v1/no-such-route", headers=auth(alice)), 404)
    assert expect(http.get("/openapi.json"), 200)["info"]["title"] == "oblivio"

    # -- store and read -----------------------------------------------------------------
    boston = store(http, alice, "I live in Boston")
    chicago = store(http, alice, "I moved to Chicago")
    denver = store(http, alice, "I live in Denver now")
    green = store(http, alice, "My favourite colour is green")
    bob_tea = store(http, bob, "Bob drinks green tea every morning")

    event = expect(http.get(f"/v1/events/{boston.event_id}", headers=auth(alice)), 200)
    assert (event["id"], event["user_id"], event["content"]) == (
        boston.event_id,
        "alice",
        "I live in Boston",
    )
    listed = expect(http.get("/v1/events", headers=auth(alice)), 200)
    assert [e["id"] for e in listed] == [
        boston.event_id,
        chicago.event_id,
        denver.event_id,
        green.event_id,
    ]
    nodes = expect(http.get(f"/v1/events/{boston.event_id}/nodes", headers=auth(alice)), 200)
    assert boston.node_id in [n["id"] for n in nodes]
    node = expect(http.get(f"/v1/nodes/{boston.node_id}", headers=auth(alice)), 200)
    assert (node["event_id"], node["lifecycle"]) == (boston.event_id, "active")

    # -- supersede: 201, exact retry 200, changed actor 409 -----------------------------
    correction = {
        "old_node_id": boston.node_id,
        "new_node_id": chicago.node_id,
        "actor_id": "agent-1",
    }
    [first] = expect(http.post("/v1/supersedences", json=correction, headers=auth(alice)), 201)
    assert first["replayed"] is False
    [again] = expect(http.post("/v1/supersedences", json=correction, headers=auth(alice)), 200)
    assert again["replayed"] is True
    assert (again["operation_id"], again["event_id"]) == (first["operation_id"], first["event_id"])
    changed = {**correction, "actor_id": "agent-2"}
    expect(http.post("/v1/supersedences", json=changed, headers=auth(alice)), 409)
    expect(http.get(f"/v1/nodes/{boston.node_id}", headers=auth(alice)), 404)
    retired = expect(
        http.get(
            f"/v1/nodes/{boston.node_id}",
            params={"include_superseded": "true"},
            headers=auth(alice),
        ),
        200,
    )
    assert (retired["lifecycle"], retired["superseded_by"]) == ("superseded", chicago.node_id)

    # -- contradictions and their resolution --------------------------------------------
    contradiction = {"node_id": chicago.node_id, "other_node_id": denver.node_id}
    expect(http.post("/v1/contradictions", json=contradiction, headers=auth(alice)), 201)
    state = expect(
        http.get(f"/v1/nodes/{chicago.node_id}/assertion-state", headers=auth(alice)), 200
    )
    assert state["contradicted_by"] == [denver.node_id]
    resolution = {"winner_node_id": denver.node_id, "loser_node_id": chicago.node_id}
    expect(http.post("/v1/contradictions/resolutions", json=resolution, headers=auth(alice)), 201)
    state = expect(
        http.get(f"/v1/nodes/{chicago.node_id}/assertion-state", headers=auth(alice)), 200
    )
    assert (state["lifecycle"], state["superseded_by"]) == ("superseded", denver.node_id)

    run_reinforce_contract(http, alice, green, chicago, bob_tea)

    # -- retrieve (consistent) ------------------------------------------------------------
    retrieved = expect(
        http.post(
            "/v1/retrieve",
            json={"query": "favourite colour green", "consistent": True},
            headers=auth(alice),
        ),
        200,
    )
    ranked = [r["node"]["id"] for r in retrieved["results"]]
    assert ranked, retrieved
    assert ranked[0] == green.node_id, retrieved
    assert boston.node_id not in ranked  # superseded
    assert chicago.node_id not in ranked  # superseded
    assert bob_tea.node_id not in ranked  # another owner's memory
    assert all(isinstance(r["components"], dict) and r["components"] for r in retrieved["results"])

    # -- triggers and attractors ------------------------------------------------------------
    trigger = expect(
        http.post("/v1/triggers", json={"keyword": "Denver", "weight": 2.0}, headers=auth(alice)),
        201,
    )
    expect(http.delete(f"/v1/triggers/{trigger['id']}", headers=auth(alice)), 204)
    expect(http.post("/v1/attractors", json={"text": "Denver"}, headers=auth(alice)), 201)
    count = expect(http.get("/v1/attractors/count", headers=auth(alice)), 200)
    assert count == {"count": 1}
    expect(http.delete("/v1/attractors", headers=auth(alice)), 204)
    assert expect(http.get("/v1/attractors/count", headers=auth(alice)), 200) == {"count": 0}

    # -- subject export while alice's memories exist -------------------------------------
    export = expect(http.get("/v1/compliance/users/alice/export", headers=auth(alice)), 200)
    assert len(export["events"]) >= 4
    assert {n["id"] for n in export["nodes"]} >= {green.node_id, denver.node_id}

    # -- delete one event ---------------------------------------------------------------------
    deleted = expect(
        http.delete(
            f"/v1/compliance/users/alice/memory/{green.event_id}",
            params={"wait_seconds": STATUS_TIMEOUT},
            headers=auth(alice),
        ),
        200,
    )
    assert (deleted["kind"], deleted["status"], deleted["events_erased"]) == (
        "delete_event",
        "completed",
        1,
    )
    assert deleted["certificate"] is not None
    expect(http.get(f"/v1/events/{green.event_id}", headers=auth(alice)), 404)
    expect(http.get(f"/v1/nodes/{green.node_id}", headers=auth(alice)), 404)

    expect(http.get("/v1/compliance/audit/export", headers=auth(alice)), 403)  # users: no

    # -- forget: 200 with the certificate when it completes within the wait -------------------
    forgotten = expect(
        http.post(
            "/v1/compliance/users/alice/forget",
            json={"wait_seconds": STATUS_TIMEOUT},
            headers=auth(alice),
        ),
        200,
    )
    assert forgotten["status"] == "completed"
    assert forgotten["certificate"] is not None
    # The forget revoked Alice's key: it answers 401 from now on (docs/erasure.md).
    expect(http.get("/v1/events", headers=auth(alice)), 401)
    operator = keys.operator
    events = http.get("/v1/events", params={"user_id": "alice"}, headers=auth(operator))
    assert expect(events, 200) == []
    expect(http.get(f"/v1/events/{denver.event_id}", headers=auth(operator)), 404)

    # -- forget without waiting: 202 + Location, completed later -----------------------------
    pending = http.post(
        "/v1/compliance/users/bob/forget", json={"wait_seconds": 0}, headers=auth(bob)
    )
    accepted = expect(pending, 202)
    assert accepted["status"] != "completed"
    assert accepted["certificate"] is None
    location = pending.headers["location"]
    assert location == accepted["status_url"] == f"/v1/compliance/requests/{accepted['request_id']}"
    expect(http.get(location, headers=auth(bob)), 401)  # Bob's key went with his data
    done = wait_for_completion(http, operator, location)
    assert done["certificate_id"] is not None
    assert done["events_erased"] == 1

    # -- the certificate, the JWKS, and verification with jwcrypto ------------------------------
    certificate = expect(
        http.get(
            f"/v1/compliance/certificates/{forgotten['certificate_id']}", headers=auth(operator)
        ),
        200,
    )
    assert certificate == forgotten["certificate"]
    jwks = expect(http.get("/v1/compliance/keys"), 200)  # public: no key
    payload = verify_with_jwcrypto(certificate, jwks)
    assert payload["certificate_id"] == forgotten["certificate_id"]
    assert payload["subject"]["reference"] == forgotten["subject_ref"]
    assert payload["request"]["kind"] == "forget"
    assert payload["request"]["reason"] == "user_request"
    assert payload["erasure"]["events_erased"] == forgotten["events_erased"]
    assert (payload["erasure"]["data_held"], payload["api_keys"]["revoked"]) == (True, 1)
    header = json.loads(base64url_decode(certificate["protected"]))
    assert header["typ"] == CERTIFICATE_TYP
    with pytest.raises(JWException):
        verify_with_jwcrypto(tampered(certificate), jwks)
    bob_certificate = expect(
        http.get(f"/v1/compliance/certificates/{done['certificate_id']}", headers=auth(operator)),
        200,
    )
    assert (
        verify_with_jwcrypto(bob_certificate, jwks)["subject"]["reference"] == done["subject_ref"]
    )

    # -- exports verify offline against the same JWKS ----------------------------------------
    manifest = verify_subject_export(export, jwks)
    assert manifest["counts"]["events"] == len(export["events"])
    verify_with_jwcrypto(export["manifest"], jwks)
    audit = http.get("/v1/compliance/audit/export", headers=auth(keys.auditor))
    text = expect(audit, 200)
    assert audit.headers["content-type"].startswith("application/x-ndjson")
    audit_manifest = verify_audit_export(text, jwks)
    actions = [json.loads(line)["entry"]["action"] for line in text.splitlines()[:-1]]
    assert audit_manifest["count"] == len(actions)
    assert actions.count("erasure.certified") >= 3  # one event, alice, bob

    # -- health -------------------------------------------------------------------------------
    health = expect(http.get("/v1/health"), 200)
    assert (health["status"], health["database"], health["backend"]) == ("ok", "ok", backend)


def run_reinforce_contract(
    http: httpx.Client, alice: str, target: Stored, superseded: Stored, foreign: Stored
) -> None:
    """PUT /v1/nodes/{id}/reinforce as the reinforcement seed specifies it."""
    url = f"/v1/nodes/{target.node_id}/reinforce"
    key = str(uuid.uuid4())
    body = {"evidence_id": target.event_id}
    first = expect(http.put(url, json=body, headers=auth(alice, **{"Idempotency-Key": key})), 200)
    for name in REINFORCE_FIELDS:
        assert name in first, f"the reinforce response lacks {name}"
    assert first["reinforcement_boost"] == pytest.approx(0.15)
    assert first["reinforcement_count"] == 1
    assert first["last_reinforced_at"] is not None

    # A committed retry applies nothing again and changes no timestamp.
    retry = expect(http.put(url, json=body, headers=auth(alice, **{"Idempotency-Key": key})), 200)
    assert {k: retry[k] for k in (*REINFORCE_FIELDS, "reinforcement_count", "updated_at")} == {
        k: first[k] for k in (*REINFORCE_FIELDS, "reinforcement_count", "updated_at")
    }

    # The same key with another request: 409, nothing applied.
    other_evidence = {"evidence_id": superseded.event_id}
    expect(http.put(url, json=other_evidence, headers=auth(alice, **{"Idempotency-Key": key})), 409)
    expect(http.put(url, headers=auth(alice, **{"Idempotency-Key": key})), 409)
    other_node = f"/v1/nodes/{superseded.node_id}/reinforce"
    expect(http.put(other_node, json=body, headers=auth(alice, **{"Idempotency-Key": key})), 409)

    # Malformed keys: 422.
    for bad in ("not-a-uuid", "1234", key + "0"):
        expect(http.put(url, json=body, headers=auth(alice, **{"Idempotency-Key": bad})), 422)

    # Unavailable node or evidence: 404 (missing, foreign and superseded alike).
    def fresh() -> dict[str, str]:
        return auth(alice, **{"Idempotency-Key": str(uuid.uuid4())})

    expect(http.put(f"/v1/nodes/{uuid.uuid4()}/reinforce", headers=fresh()), 404)
    expect(http.put(f"/v1/nodes/{foreign.node_id}/reinforce", headers=fresh()), 404)
    expect(http.put(other_node, headers=fresh()), 404)
    expect(http.put(url, json={"evidence_id": str(uuid.uuid4())}, headers=fresh()), 404)
    expect(http.put(url, json={"evidence_id": foreign.event_id}, headers=fresh()), 404)

    node = expect(http.get(f"/v1/nodes/{target.node_id}", headers=auth(alice)), 200)
    assert node["reinforcement_count"] == 1, "a rejected or replayed call was applied"

    # A new key is a new confirmation; no key counts separately too.
    second = expect(http.put(url, headers=fresh()), 200)
    assert second["reinforcement_boost"] == pytest.approx(0.30)
    expect(http.put(url), 401)
    third = expect(http.put(url, headers=auth(alice)), 200)
    assert third["reinforcement_count"] == 3
