"""The authorisation matrix: every published route × every kind of principal.

Principals: no key, a bad key (a real key id with a wrong secret), a revoked
key, a user (alice), another user (bob), an operator and an auditor.  Each
route states how to call it on the caller's own data, and pairs of calls that
name someone else's data ("foreign") and data that does not exist
("missing").  The rules (DESIGN §7, oblivio/http/auth.py):

* no, bad or revoked key → 401, nothing written;
* auditor → 403 on memory routes and API key management, allowed on audit
  export, erasure status, certificates and keys;
* user → 403 on the audit export and API key management; a user naming another user's id (path,
  query or body) or another user's node, event, trigger, request or
  certificate id gets a 404 indistinguishable from a missing id (status,
  content type and body), and nothing is written;
* operator → allowed everywhere but on re-embedding (the whole store's embedder);
* cluster-wide operator → allowed everywhere;
* /v1/health and /v1/compliance/keys are public.

Routes are enumerated from the published OpenAPI document, so a new route
fails ``test_every_published_route_is_in_the_matrix`` until it gets a row here,
and ``test_every_secured_route_refuses_a_request_without_a_key`` covers it at
once.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest

from oblivio.http import create_app
from oblivio.memory import dpo, items, vector_rebuilds
from tests.http.conftest import (
    ALICE,
    BOB,
    BOUND_USER,
    PRINCIPALS,
    Response,
    World,
    create_key,
    log_size,
)

FORGET_WAIT = {"wait_seconds": 10}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@dataclass(frozen=True)
class Call:
    method: str
    url: str
    params: dict[str, Any] | None = None
    json: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def send(self, world: World, principal: str) -> Response:
        return world.client.request(
            self.method,
            self.url,
            params=self.params,
            json=self.json,
            headers=world.headers(principal, **self.headers),
        )

    def __str__(self) -> str:
        return f"{self.method} {self.url} params={self.params} json={self.json}"


Own = Callable[[World, str], Call]  # (world, me)
Foreign = Callable[[World, str, str], Call]  # (world, me, them)
Missing = Callable[[World, str], Call]  # (world, me)


@dataclass(frozen=True)
class Probe:
    """A call naming someone else's data, and the same call naming nothing that exists."""

    name: str
    foreign: Foreign
    missing: Missing


@dataclass(frozen=True)
class Spec:
    # member | proof (members and auditors) | auditor | operator | cluster | public
    access: str
    own: Own
    probes: tuple[Probe, ...] = ()


def rnd() -> str:
    return str(uuid.uuid4())


def nobody() -> str:
    return f"nobody-{uuid.uuid4().hex[:8]}"


def fresh_key() -> dict[str, str]:
    return {"Idempotency-Key": rnd()}


# -- probes shared by many routes ------------------------------------------------------


def user_in_body(method: str, url: str, **body: Any) -> tuple[Own, Probe]:
    def call(user: str) -> Call:
        return Call(method, url, json={**body, "user_id": user})

    return (
        lambda w, me: call(me),
        Probe("user id in body", lambda w, me, them: call(them), lambda w, me: call(nobody())),
    )


def user_in_query(method: str, url: str) -> tuple[Own, Probe]:
    def call(user: str) -> Call:
        return Call(method, url, params={"user_id": user})

    return (
        lambda w, me: call(me),
        Probe("user id in query", lambda w, me, them: call(them), lambda w, me: call(nobody())),
    )


def by_user_body(method: str, url: str, **body: Any) -> Spec:
    own, probe = user_in_body(method, url, **body)
    return Spec("member", own, (probe,))


def by_user_query(method: str, url: str) -> Spec:
    own, probe = user_in_query(method, url)
    return Spec("member", own, (probe,))


def by_seed_id(template: str, field: str) -> Spec:
    """A GET naming one id of a user's seed (``event_id`` or ``node_id``) in its path."""

    def call(value: object) -> Call:
        return Call("GET", template.format(**{field: value}))

    def seed_id(world: World, user: str) -> object:
        return getattr(world.shared_seed(user), field)

    def naming(value: object, user: str) -> Call:
        return Call("GET", template.format(**{field: value}), params={"user_id": user})

    probe = Probe(
        field.replace("_", " "),
        lambda w, me, them: call(seed_id(w, them)),
        lambda w, me: call(rnd()),
    )
    owner = Probe(
        "user id in query",
        lambda w, me, them: naming(seed_id(w, me), them),
        lambda w, me: naming(seed_id(w, me), nobody()),
    )
    return Spec("member", lambda w, me: call(seed_id(w, me)), (probe, owner))


def by_event(template: str) -> Spec:
    return by_seed_id(template, "event_id")


def by_node(template: str) -> Spec:
    return by_seed_id(template, "node_id")


def node_pair(url: str, first: str, second: str) -> Spec:
    """A correction naming two nodes (and optionally evidence) of one owner."""

    def call(a: object, b: object, evidence: object | None = None) -> Call:
        body = {first: str(a), second: str(b)}
        if evidence is not None:
            body["evidence_id"] = str(evidence)
        return Call("POST", url, json=body)

    def own_pair(w: World, me: str) -> tuple[uuid.UUID, uuid.UUID]:
        return w.seed(me).node_id, w.seed(me).node_id

    return Spec(
        "member",
        lambda w, me: call(*own_pair(w, me)),
        (
            Probe(
                "both nodes",
                lambda w, me, them: call(w.seed(them).node_id, w.seed(them).node_id),
                lambda w, me: call(rnd(), rnd()),
            ),
            Probe(
                "second node",
                lambda w, me, them: call(w.seed(me).node_id, w.seed(them).node_id),
                lambda w, me: call(w.seed(me).node_id, rnd()),
            ),
            Probe(
                "evidence",
                lambda w, me, them: call(*own_pair(w, me), w.shared_seed(them).event_id),
                lambda w, me: call(*own_pair(w, me), rnd()),
            ),
        ),
    )


def resolution_spec() -> Spec:
    url = "/v1/contradictions/resolutions"

    def call(winner: object, loser: object) -> Call:
        return Call("POST", url, json={"winner_node_id": str(winner), "loser_node_id": str(loser)})

    def open_pair(w: World, user: str) -> Call:
        a, b = w.contradiction(user)
        return call(a.node_id, b.node_id)

    return Spec(
        "member",
        open_pair,
        (
            Probe(
                "contradiction",
                lambda w, me, them: open_pair(w, them),
                lambda w, me: call(rnd(), rnd()),
            ),
            Probe(
                "loser",
                lambda w, me, them: call(w.seed(me).node_id, w.contradiction(them)[1].node_id),
                lambda w, me: call(w.seed(me).node_id, rnd()),
            ),
        ),
    )


def likely_update_spec(verb: str) -> Spec:
    """Confirm or reject the likely update of an older node."""

    def call(node: object) -> Call:
        return Call("POST", f"/v1/nodes/{node}/likely-update/{verb}", json={})

    return Spec(
        "member",
        lambda w, me: call(w.likely_update(me)[0].node_id),
        (
            Probe(
                "node id",
                lambda w, me, them: call(w.likely_update(them)[0].node_id),
                lambda w, me: call(rnd()),
            ),
        ),
    )


def reinforce_spec() -> Spec:
    def call(node: object, evidence: object | None = None) -> Call:
        body = None if evidence is None else {"evidence_id": str(evidence)}
        return Call("PUT", f"/v1/nodes/{node}/reinforce", json=body, headers=fresh_key())

    return Spec(
        "member",
        lambda w, me: call(w.shared_seed(me).node_id, w.shared_seed(me).event_id),
        (
            Probe(
                "node id",
                lambda w, me, them: call(w.shared_seed(them).node_id),
                lambda w, me: call(rnd()),
            ),
            Probe(
                "evidence id",
                lambda w, me, them: call(w.shared_seed(me).node_id, w.shared_seed(them).event_id),
                lambda w, me: call(w.shared_seed(me).node_id, rnd()),
            ),
        ),
    )


def remove_trigger_spec() -> Spec:
    def call(trigger: object, user: str) -> Call:
        return Call("DELETE", f"/v1/triggers/{trigger}", params={"user_id": user})

    return Spec(
        "member",
        lambda w, me: call(w.trigger(me), me),
        (
            Probe(
                "user id in query",
                lambda w, me, them: call(w.trigger(them), them),
                lambda w, me: call(rnd(), nobody()),
            ),
            Probe(
                "trigger id",
                lambda w, me, them: call(w.trigger(them), me),
                lambda w, me: call(rnd(), me),
            ),
        ),
    )


def delete_memory_spec() -> Spec:
    def call(user: str, event: object) -> Call:
        return Call("DELETE", f"/v1/compliance/users/{user}/memory/{event}")

    return Spec(
        "member",
        lambda w, me: call(me, w.seed(me).event_id),
        (
            Probe(
                "user id in path",
                lambda w, me, them: call(them, w.seed(them).event_id),
                lambda w, me: call(nobody(), rnd()),
            ),
            Probe(
                "event id",
                lambda w, me, them: call(me, w.seed(them).event_id),
                lambda w, me: call(me, rnd()),
            ),
        ),
    )


def by_user_path(method: str, template: str, **body: Any) -> Spec:
    def call(user: str) -> Call:
        return Call(method, template.format(user_id=user), json=body or None)

    return Spec(
        "member",
        lambda w, me: call(me),
        (Probe("user id in path", lambda w, me, them: call(them), lambda w, me: call(nobody())),),
    )


def proof_spec(template: str, make: Callable[[World, str], uuid.UUID]) -> Spec:
    def call(ident: object) -> Call:
        return Call("GET", template.format(ident=ident))

    return Spec(
        "proof",
        lambda w, me: call(make(w, me)),
        (Probe("id", lambda w, me, them: call(make(w, them)), lambda w, me: call(rnd())),),
    )


def item_key(world: World, user: str) -> str:
    """The key of a fresh item of ``user``: keys hold ``/`` and spaces, as item keys may."""
    key = f"notes/{uuid.uuid4().hex[:8]} city"
    items.put_item(world.ctx, key, "I like tea", user_id=user)
    return key


def get_item_spec() -> Spec:
    def call(key: str, user: str) -> Call:
        return Call("GET", f"/v1/items/{quote(key, safe='')}", params={"user_id": user})

    return Spec(
        "member",
        lambda w, me: call(item_key(w, me), me),
        (
            Probe(
                "user id in query",
                lambda w, me, them: call(item_key(w, them), them),
                lambda w, me: call(item_key(w, me), nobody()),
            ),
            Probe(
                "item key",
                lambda w, me, them: call(item_key(w, them), me),
                lambda w, me: call(rnd(), me),
            ),
        ),
    )


def put_item_spec() -> Spec:
    def call(user: str) -> Call:
        return Call("PUT", f"/v1/items/{rnd()}", json={"content": "I like tea", "user_id": user})

    return Spec(
        "member",
        lambda w, me: call(me),
        (Probe("user id in body", lambda w, me, them: call(them), lambda w, me: call(nobody())),),
    )


def revoke_key_spec() -> Spec:
    def call(key_id: str) -> Call:
        return Call("DELETE", f"/v1/admin/keys/{key_id}")

    return Spec(
        "operator",
        lambda w, me: call(create_key(w.ctx, "auditor").split("_")[1]),
        (Probe("key id", lambda w, me, them: call("f" * 16), lambda w, me: call("e" * 16)),),
    )


def desk_spec(path: str, setup: Callable[[World, str], None] | None = None, **body: Any) -> Spec:
    """An operator's action on the data-protection officer's desk, on a fresh person
    (``setup`` puts them in the state the action needs: restricted, held)."""

    def call(w: World, me: str) -> Call:
        person = f"{me}-{uuid.uuid4().hex[:8]}"
        if setup is not None:
            setup(w, person)
        return Call("POST", f"/v1/dpo/people/{path}", json={"user_id": person, **body})

    return Spec("operator", call)


def registered(world: World, user: str) -> uuid.UUID:
    """A fresh register entry (an access request of ``user``)."""
    return dpo.export_for(world.ctx, user, reference="T-1")[0].request_id


SPECS: dict[tuple[str, str], Spec] = {
    ("POST", "/v1/events"): by_user_body("POST", "/v1/events", content="I like tea"),
    ("POST", "/v1/events:batch"): by_user_body(
        "POST", "/v1/events:batch", memories=[{"content": "I like tea"}]
    ),
    ("POST", "/v1/ingest"): by_user_body("POST", "/v1/ingest", message="I like tea"),
    ("GET", "/v1/events"): by_user_query("GET", "/v1/events"),
    ("GET", "/v1/events/{event_id}"): by_event("/v1/events/{event_id}"),
    ("GET", "/v1/events/{event_id}/nodes"): by_event("/v1/events/{event_id}/nodes"),
    ("GET", "/v1/nodes"): by_user_query("GET", "/v1/nodes"),
    ("GET", "/v1/nodes/{node_id}"): by_node("/v1/nodes/{node_id}"),
    ("GET", "/v1/nodes/{node_id}/assertion-state"): by_node("/v1/nodes/{node_id}/assertion-state"),
    ("POST", "/v1/supersedences"): node_pair("/v1/supersedences", "old_node_id", "new_node_id"),
    ("POST", "/v1/contradictions"): node_pair("/v1/contradictions", "node_id", "other_node_id"),
    ("POST", "/v1/contradictions/resolutions"): resolution_spec(),
    ("PUT", "/v1/nodes/{node_id}/reinforce"): reinforce_spec(),
    ("POST", "/v1/nodes/{node_id}/likely-update/confirm"): likely_update_spec("confirm"),
    ("POST", "/v1/nodes/{node_id}/likely-update/reject"): likely_update_spec("reject"),
    ("POST", "/v1/retrieve"): by_user_body("POST", "/v1/retrieve", query="tea"),
    ("GET", "/v1/items"): by_user_query("GET", "/v1/items"),
    ("PATCH", "/v1/items"): by_user_body("PATCH", "/v1/items", expiries={}),
    ("GET", "/v1/items/{key}"): get_item_spec(),
    ("PUT", "/v1/items/{key}"): put_item_spec(),
    ("GET", "/v1/subjects"): Spec("operator", lambda w, me: Call("GET", "/v1/subjects")),
    ("GET", "/v1/subjects/ref"): by_user_query("GET", "/v1/subjects/ref"),
    ("GET", "/v1/embedder"): Spec("member", lambda w, me: Call("GET", "/v1/embedder")),
    ("POST", "/v1/triggers"): by_user_body("POST", "/v1/triggers", keyword="tea"),
    ("DELETE", "/v1/triggers/{trigger_id}"): remove_trigger_spec(),
    ("POST", "/v1/attractors"): by_user_body("POST", "/v1/attractors", text="coffee"),
    ("DELETE", "/v1/attractors"): by_user_query("DELETE", "/v1/attractors"),
    ("GET", "/v1/attractors/count"): by_user_query("GET", "/v1/attractors/count"),
    ("DELETE", "/v1/compliance/users/{user_id}/memory/{event_id}"): delete_memory_spec(),
    ("POST", "/v1/compliance/users/{user_id}/forget"): by_user_path(
        "POST", "/v1/compliance/users/{user_id}/forget", **FORGET_WAIT
    ),
    ("GET", "/v1/compliance/requests/{request_id}"): proof_spec(
        "/v1/compliance/requests/{ident}", World.erasure_request
    ),
    ("GET", "/v1/compliance/certificates/{certificate_id}"): proof_spec(
        "/v1/compliance/certificates/{ident}", World.certificate
    ),
    ("GET", "/v1/compliance/keys"): Spec(
        "public", lambda w, me: Call("GET", "/v1/compliance/keys")
    ),
    ("GET", "/v1/compliance/users/{user_id}/export"): by_user_path(
        "GET", "/v1/compliance/users/{user_id}/export"
    ),
    ("GET", "/v1/compliance/audit/export"): Spec(
        "auditor", lambda w, me: Call("GET", "/v1/compliance/audit/export")
    ),
    ("POST", "/v1/dpo/people/lookup"): desk_spec("lookup"),
    ("POST", "/v1/dpo/people/export"): desk_spec("export", reference="T-1"),
    ("POST", "/v1/dpo/people/forget"): desk_spec("forget", reference="T-1", wait_seconds=10),
    ("POST", "/v1/dpo/people/restrict"): desk_spec("restrict", ground="art18-1-a", reference="T-1"),
    ("POST", "/v1/dpo/people/lift-restriction"): desk_spec(
        "lift-restriction",
        lambda w, u: dpo.restrict(w.ctx, u, ground="art18-1-a", reference="T-1") and None,
        reference="T-1",
    ),
    ("POST", "/v1/dpo/people/hold"): desk_spec("hold", ground="art17-3-e", reference="T-1"),
    ("POST", "/v1/dpo/people/lift-hold"): desk_spec(
        "lift-hold",
        lambda w, u: dpo.place_hold(w.ctx, u, ground="art17-3-e", reference="T-1") and None,
        reference="T-1",
    ),
    ("GET", "/v1/dpo/requests"): Spec("auditor", lambda w, me: Call("GET", "/v1/dpo/requests")),
    ("GET", "/v1/dpo/register"): Spec("auditor", lambda w, me: Call("GET", "/v1/dpo/register")),
    ("GET", "/v1/dpo/requests/{request_id}"): Spec(
        "auditor", lambda w, me: Call("GET", f"/v1/dpo/requests/{registered(w, me)}")
    ),
    ("POST", "/v1/dpo/requests/{request_id}/extend"): Spec(
        "operator",
        lambda w, me: Call(
            "POST", f"/v1/dpo/requests/{registered(w, me)}/extend", json={"reason": "complexity"}
        ),
    ),
    ("GET", "/v1/health"): Spec("public", lambda w, me: Call("GET", "/v1/health")),
    ("POST", "/v1/admin/keys"): Spec(
        "operator", lambda w, me: Call("POST", "/v1/admin/keys", json={"principal": "auditor"})
    ),
    ("GET", "/v1/admin/keys"): Spec("operator", lambda w, me: Call("GET", "/v1/admin/keys")),
    ("GET", "/metrics"): Spec("operator", lambda w, me: Call("GET", "/metrics")),
    ("DELETE", "/v1/admin/keys/{key_id}"): revoke_key_spec(),
    ("POST", "/v1/admin/rebuilds"): Spec(
        "cluster", lambda w, me: Call("POST", "/v1/admin/rebuilds", json={})
    ),
    ("GET", "/v1/admin/rebuilds/{rebuild_id}"): Spec(
        "cluster",
        lambda w, me: Call(
            "GET", f"/v1/admin/rebuilds/{vector_rebuilds.start_vector_rebuild(w.ctx).rebuild_id}"
        ),
    ),
}

AUDITOR_ROUTES = {key for key, spec in SPECS.items() if spec.access in ("proof", "auditor")}
PUBLIC_ROUTES = {("GET", "/v1/health"), ("GET", "/v1/compliance/keys")}


def published_operations() -> dict[tuple[str, str], dict[str, Any]]:
    """Every operation of the published OpenAPI document."""
    document = create_app(None).openapi()  # type: ignore[arg-type]  # schema needs no store
    return {
        (method.upper(), path): operation
        for path, item in document["paths"].items()
        for method, operation in item.items()
    }


# -- checking one route ---------------------------------------------------------------


def normalised(response: Response) -> tuple[int, str, str]:
    """Status, content type and body with ids masked: what a caller can compare."""
    return (
        response.status_code,
        response.headers.get("content-type", ""),
        UUID.sub("<id>", response.text),
    )


@dataclass
class Matrix:
    world: World
    route: str
    problems: list[str] = field(default_factory=list)

    def send(self, principal: str, label: str, call: Call) -> Response:
        before = log_size(self.world.ctx)
        response = call.send(self.world, principal)
        if response.status_code >= 500:
            self.fail(principal, label, call, response, "server error")
        elif response.status_code >= 400 and log_size(self.world.ctx) != before:
            self.fail(principal, label, call, response, "a refused request wrote to the log")
        return response

    def fail(self, principal: str, label: str, call: Call, response: Response, why: str) -> None:
        self.problems.append(
            f"{self.route} as {principal} ({label}): {why}; got {response.status_code} "
            f"{response.text[:200]!r} for {call}"
        )

    def expect(
        self, principal: str, label: str, call: Call, allowed: Callable[[int], bool], want: str
    ) -> Response:
        response = self.send(principal, label, call)
        if not allowed(response.status_code):
            self.fail(principal, label, call, response, f"expected {want}")
        return response


def is_success(status: int) -> bool:
    return 200 <= status < 300


def is_permitted(status: int) -> bool:
    return status not in (401, 403) and status < 500


def check_route(world: World, key: tuple[str, str], spec: Spec) -> list[str]:
    matrix = Matrix(world, f"{key[0]} {key[1]}")
    for principal in PRINCIPALS:
        me = BOUND_USER.get(principal, ALICE)
        them = BOB if me == ALICE else ALICE
        own = [("own", spec.own(world, me))]
        if principal in ("operator", "auditor", "cluster"):
            own.append(("bob's", spec.own(world, BOB)))
        probes = [(p.name, p.foreign(world, me, them), p.missing(world, me)) for p in spec.probes]
        calls = own + [(f"{n} foreign", f) for n, f, _ in probes]
        calls += [(f"{n} missing", m) for n, _, m in probes]

        if spec.access == "public":
            for label, call in calls:
                matrix.expect(principal, label, call, lambda s: s == 200, "200 (public)")
        elif principal in ("none", "bad", "revoked"):
            for label, call in calls:
                response = matrix.expect(principal, label, call, lambda s: s == 401, "401")
                if response.headers.get("www-authenticate") != "Bearer":
                    matrix.fail(principal, label, call, response, "no WWW-Authenticate: Bearer")
        elif (
            (principal == "auditor" and key not in AUDITOR_ROUTES)
            or (principal in BOUND_USER and spec.access in ("auditor", "operator", "cluster"))
            or (principal != "cluster" and spec.access == "cluster")
        ):
            for label, call in calls:
                matrix.expect(principal, label, call, lambda s: s == 403, "403")
        elif principal in BOUND_USER:
            # The probes first: a user's own forget revokes the user's key.
            for name, foreign, missing in probes:
                got = matrix.expect(
                    principal, f"{name} foreign", foreign, lambda s: s == 404, "404"
                )
                absent = matrix.expect(
                    principal, f"{name} missing", missing, lambda s: s == 404, "404"
                )
                if normalised(got) != normalised(absent):
                    matrix.problems.append(
                        f"{matrix.route} as {principal} ({name}): a foreign id answers "
                        f"{normalised(got)} but a missing one {normalised(absent)}"
                    )
            for label, call in own:
                matrix.expect(principal, label, call, is_success, "2xx")
        else:  # operator, or an auditor on a route it may use
            for label, call in own:
                matrix.expect(principal, label, call, is_success, "2xx")
            for label, call in calls[len(own) :]:
                matrix.expect(principal, label, call, is_permitted, "neither 401 nor 403")
    return matrix.problems


@pytest.mark.parametrize("route", list(SPECS), ids=[f"{m} {p}" for m, p in SPECS])
def test_authorisation_matrix(sqlite_world: World, route: tuple[str, str]) -> None:
    problems = check_route(sqlite_world, route, SPECS[route])
    assert not problems, "\n".join(problems)


def test_every_published_route_is_in_the_matrix() -> None:
    published = set(published_operations())
    assert published == set(SPECS), (
        f"routes without a matrix row: {sorted(published - set(SPECS))}; "
        f"rows without a route: {sorted(set(SPECS) - published)}"
    )


def test_only_health_and_keys_are_public() -> None:
    unsecured = {key for key, op in published_operations().items() if not op.get("security")}
    assert unsecured == PUBLIC_ROUTES
    assert {key for key, spec in SPECS.items() if spec.access == "public"} == PUBLIC_ROUTES


def test_public_routes_answer_without_a_key(sqlite_world: World) -> None:
    health = sqlite_world.client.get("/v1/health")
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    keys = sqlite_world.client.get("/v1/compliance/keys")
    assert keys.status_code == 200
    assert keys.json()["keys"]
    assert all(k["kty"] == "OKP" for k in keys.json()["keys"])
    assert all("d" not in k for k in keys.json()["keys"]), "a private key is published"


def test_every_secured_route_refuses_a_request_without_a_key(sqlite_world: World) -> None:
    """Any route the OpenAPI marks as secured, with ids filled in, answers 401 keyless."""
    before = log_size(sqlite_world.ctx)
    refused = {}
    for (method, path), operation in published_operations().items():
        if not operation.get("security"):
            continue
        url = re.sub(r"\{[^}]*user_id\}", ALICE, path)
        url = re.sub(r"\{[^}]+\}", rnd(), url)
        body: dict[str, Any] | None = {} if "requestBody" in operation else None
        response = sqlite_world.client.request(method, url, json=body)
        refused[f"{method} {path}"] = response.status_code
    assert set(refused.values()) == {401}, refused
    assert log_size(sqlite_world.ctx) == before
