"""Bad input over HTTP (DESIGN §8): a clear 4xx, never a 5xx, and nothing written.

Malformed UUIDs in paths, unknown fields, oversized content and metadata,
invalid UTF-8 and lone surrogates, out-of-range numbers.  "Nothing written" is
checked from the Python side: the whole log (``ctx.store.read_all``) has as
many events after the request as before.  Routes with ids in their path and
routes with a body are enumerated from the published OpenAPI document.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from oblivio.http import create_app
from tests.http.conftest import ALICE, Response, World, log_size

MALFORMED_UUIDS = ("not-a-uuid", "1234", "00000000-0000-0000-0000-00000000000g", "%20", "..")

#: A body each body-taking route accepts (ids are filled in per test).
VALID_BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/v1/events"): {"content": "I like tea"},
    ("POST", "/v1/events:batch"): {"memories": [{"content": "I like tea"}]},
    ("POST", "/v1/supersedences"): {"old_node_id": "{node}", "new_node_id": "{other_node}"},
    ("POST", "/v1/contradictions"): {"node_id": "{node}", "other_node_id": "{other_node}"},
    ("POST", "/v1/contradictions/resolutions"): {
        "winner_node_id": "{node}",
        "loser_node_id": "{other_node}",
    },
    ("PUT", "/v1/nodes/{node_id}/reinforce"): {"evidence_id": "{event}"},
    ("POST", "/v1/nodes/{node_id}/likely-update/confirm"): {"actor_id": "desk"},
    ("POST", "/v1/nodes/{node_id}/likely-update/reject"): {"actor_id": "desk"},
    ("POST", "/v1/retrieve"): {"query": "tea"},
    ("POST", "/v1/triggers"): {"keyword": "tea"},
    ("POST", "/v1/attractors"): {"text": "coffee"},
    ("POST", "/v1/compliance/users/{user_id}/forget"): {"wait_seconds": 0},
    ("POST", "/v1/admin/keys"): {"principal": "auditor"},
    ("POST", "/v1/ingest"): {"message": "I like tea"},
    ("POST", "/v1/admin/rebuilds"): {"embedder": "hashing:64"},
    ("PUT", "/v1/items/{key}"): {"content": "I like tea"},
    ("PATCH", "/v1/items"): {"expiries": {"city": None}},
    ("POST", "/v1/dpo/people/lookup"): {"user_id": ALICE},
    ("POST", "/v1/dpo/people/export"): {"user_id": ALICE, "reference": "T-1"},
    ("POST", "/v1/dpo/people/forget"): {"user_id": ALICE, "reference": "T-1", "wait_seconds": 0},
    ("POST", "/v1/dpo/people/restrict"): {
        "user_id": ALICE,
        "ground": "art18-1-a",
        "reference": "T-1",
    },
    ("POST", "/v1/dpo/people/lift-restriction"): {"user_id": ALICE, "reference": "T-1"},
    ("POST", "/v1/dpo/people/hold"): {"user_id": ALICE, "ground": "art17-3-e", "reference": "T-1"},
    ("POST", "/v1/dpo/people/lift-hold"): {"user_id": ALICE, "reference": "T-1"},
    ("POST", "/v1/dpo/requests/{request_id}/extend"): {"reason": "complexity"},
}

#: Body routes a user key may not call at all (it would get 403 before any validation).
OPERATOR_ONLY = {("POST", "/v1/admin/keys"), ("POST", "/v1/admin/rebuilds")} | {
    route for route in VALID_BODIES if route[1].startswith("/v1/dpo/")
}
#: Routes for cluster-wide operator keys only.
CLUSTER_ONLY = {("POST", "/v1/admin/rebuilds")}


def principal_for(route: tuple[str, str]) -> str:
    """The principal that may call ``route`` with a valid body."""
    if route in CLUSTER_ONLY:
        return "cluster"
    return "operator" if route in OPERATOR_ONLY else "user"


@functools.cache  # building the app and its schema takes a while: once per session
def openapi_paths() -> dict[str, dict[str, Any]]:
    document: dict[str, Any] = create_app(None).openapi()  # type: ignore[arg-type]
    paths: dict[str, dict[str, Any]] = document["paths"]
    return paths


def routes_with_uuid_paths() -> list[tuple[str, str]]:
    found = []
    for path, item in openapi_paths().items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "path" and parameter["schema"].get("format") == "uuid":
                    found.append((method.upper(), path))
                    break
    return found


def routes_with_bodies() -> list[tuple[str, str]]:
    return [
        (method.upper(), path)
        for path, item in openapi_paths().items()
        for method, operation in item.items()
        if "requestBody" in operation
    ]


def fill(template: str, world: World, malformed: str | None = None) -> str:
    """A concrete URL: uuid path parameters malformed (or real ids), user ids alice."""
    seed = world.shared_seed(ALICE)
    url = re.sub(r"\{user_id\}", ALICE, template)
    if malformed is not None:
        return re.sub(r"\{[^}]+\}", malformed, url)
    return url.replace("{node_id}", str(seed.node_id)).replace("{event_id}", str(seed.event_id))


def body_for(key: tuple[str, str], world: World) -> dict[str, Any]:
    first, second = world.shared_seed(ALICE), world.seed(ALICE)
    ids = {
        "{node}": str(first.node_id),
        "{other_node}": str(second.node_id),
        "{event}": str(first.event_id),
    }
    return {k: ids.get(v, v) if isinstance(v, str) else v for k, v in VALID_BODIES[key].items()}


@dataclass
class Refusals:
    """Sends requests that must be refused; collects every way one was not.

    A refusal is a 4xx (one of the given statuses, when given) that wrote
    nothing: ``log_size`` is the same after the request as before it.
    """

    world: World
    problems: list[str] = field(default_factory=list)

    def check(self, label: str, send: Callable[[], Response], *statuses: int) -> None:
        before = log_size(self.world.ctx)
        response = send()
        shown = f"{label}: {response.request.method} {response.request.url} answered " + (
            f"{response.status_code} {response.text[:200]!r}"
        )
        if not 400 <= response.status_code < 500:
            self.problems.append(f"{shown}; expected a 4xx")
        elif statuses and response.status_code not in statuses:
            self.problems.append(f"{shown}; expected one of {statuses}")
        if log_size(self.world.ctx) != before:
            self.problems.append(f"{shown}; and it wrote to the store")

    def json(
        self, label: str, method: str, url: str, body: Any, *statuses: int, principal: str = "user"
    ) -> None:
        headers = self.world.headers(principal)
        self.check(
            label,
            lambda: self.world.client.request(method, url, json=body, headers=headers),
            *statuses,
        )

    def raw(
        self,
        label: str,
        method: str,
        url: str,
        content: bytes,
        *statuses: int,
        principal: str = "user",
        content_type: str = "application/json",
    ) -> None:
        headers = self.world.headers(principal, **{"Content-Type": content_type})
        self.check(
            label,
            lambda: self.world.client.request(method, url, content=content, headers=headers),
            *statuses,
        )

    def assert_none(self) -> None:
        assert not self.problems, "\n".join(self.problems)


# -- malformed ids --------------------------------------------------------------------


def test_malformed_uuids_in_paths_answer_422_and_write_nothing(world: World) -> None:
    routes = routes_with_uuid_paths()
    assert len(routes) >= 8, routes
    refusals = Refusals(world)
    for method, path in routes:
        for malformed in MALFORMED_UUIDS:
            url = fill(path, world, malformed)
            if malformed == ".." and httpx.URL(f"http://x{url}").path in openapi_paths():
                # The client resolves the dot segment, so the request names another
                # route (/v1/events/../nodes is /v1/nodes), not a malformed id.
                continue
            body = body_for((method, path), world) if (method, path) in VALID_BODIES else None
            # "%20" and ".." may not even match the route (404); the others must be 422.
            statuses = (404, 422) if malformed in ("%20", "..") else (422,)
            # The desk's routes refuse a user key (403) before they read the path.
            principals = ("operator",) if path.startswith("/v1/dpo/") else ("user", "operator")
            for principal in principals:
                refusals.json(
                    f"{malformed!r} as {principal}",
                    method,
                    url,
                    body,
                    *statuses,
                    principal=principal,
                )
    refusals.assert_none()


def test_malformed_idempotency_keys_and_body_ids_answer_422(world: World) -> None:
    seed = world.shared_seed(ALICE)
    url = f"/v1/nodes/{seed.node_id}/reinforce"
    refusals = Refusals(world)
    for key in ("nope", "", "{" + str(uuid.uuid4()) + "}x"):
        headers = world.headers("user", **{"Idempotency-Key": key})
        send = functools.partial(world.client.put, url, headers=headers)
        refusals.check(f"key {key!r}", send, 422)
    refusals.json("evidence id", "PUT", url, {"evidence_id": "nope"}, 422)
    pair = {"old_node_id": "nope", "new_node_id": str(seed.node_id)}
    refusals.json("node id in body", "POST", "/v1/supersedences", pair, 422)
    refusals.assert_none()


# -- unknown fields ---------------------------------------------------------------------


def test_every_body_route_has_a_valid_body_here() -> None:
    assert set(routes_with_bodies()) == set(VALID_BODIES)


def test_unknown_fields_answer_422_and_write_nothing(world: World) -> None:
    refusals = Refusals(world)
    for route in VALID_BODIES:
        method, path = route
        body = {**body_for(route, world), "unexpected_field": "x"}
        who = principal_for(route)
        refusals.json(f"{method} {path}", method, fill(path, world), body, 422, principal=who)
    first, second = world.seed(ALICE), world.seed(ALICE)
    entry = {"old_node_id": str(first.node_id), "new_node_id": str(second.node_id), "extra": 1}
    refusals.json("nested", "POST", "/v1/supersedences", {"corrections": [entry]}, 422)
    refusals.assert_none()


# -- wrong JSON types ---------------------------------------------------------------------

#: JSON values and their types: a member is sent each one its schema's types exclude.
SAMPLES: list[tuple[str, Any]] = [
    ("boolean", False),
    ("boolean", True),
    ("integer", 0),
    ("integer", 1),
    ("number", 0.5),
    ("string", "1"),
    ("array", []),
    ("object", {}),
    ("null", None),
]


def json_types(schema: dict[str, Any], components: dict[str, Any]) -> set[str] | None:
    """The JSON types ``schema`` admits (``number`` admits integers); None: not said."""
    if "$ref" in schema:
        return json_types(components[schema["$ref"].rsplit("/", 1)[-1]], components)
    if "anyOf" in schema or "oneOf" in schema:
        found: set[str] = set()
        for choice in schema.get("anyOf", schema.get("oneOf")):
            types = json_types(choice, components)
            if types is None:
                return None
            found |= types
        return found
    if "type" not in schema:
        return None
    types = {schema["type"]} if isinstance(schema["type"], str) else set(schema["type"])
    return types | {"integer"} if "number" in types else types


def test_wrong_json_types_answer_422_and_write_nothing(sqlite_world: World) -> None:
    """Every member of every body, sent a value of each JSON type its schema excludes
    (``false`` for a number, ``0`` for a boolean or a time, ``"1"`` for a number, …), is
    refused: no conversion makes it mean something it does not say.  (Validation is the
    HTTP layer's: one backend is enough.)"""
    world = sqlite_world
    document = create_app(None).openapi()  # type: ignore[arg-type]
    components = document["components"]["schemas"]
    refusals = Refusals(world)
    tried = 0
    for route in VALID_BODIES:
        method, path = route
        content = openapi_paths()[path][method.lower()]["requestBody"]["content"]
        schema = json_types_target(content["application/json"]["schema"], components)
        who = principal_for(route)
        valid = body_for(route, world)  # every request is refused: it stays valid
        for name, member in schema["properties"].items():
            allowed = json_types(member, components)
            if allowed is None:
                continue
            for json_type, value in SAMPLES:
                if json_type in allowed:
                    continue
                body = {**valid, name: value}
                label = f"{method} {path} {name}={value!r}"
                refusals.json(label, method, fill(path, world), body, 422, principal=who)
                tried += 1
    refusals.assert_none()
    assert tried > 200, tried
    # JSON Schema's integer includes 5.0: taken, like 5.
    whole = {"query": "tea", "limit": 5.0}
    taken = world.client.post("/v1/retrieve", json=whole, headers=world.headers("user"))
    assert taken.status_code == 200, taken.text


def json_types_target(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """The object schema a request body refers to (optional bodies: its non-null choice)."""
    for choice in schema.get("anyOf", [schema]):
        if "$ref" in choice:
            found: dict[str, Any] = components[choice["$ref"].rsplit("/", 1)[-1]]
            return found
    return schema


# -- unknown query parameters ---------------------------------------------------------


def test_unknown_query_parameters_are_refused_after_the_key_is_checked(
    sqlite_world: World,
) -> None:
    """``?unexpected=1`` answers 422 on every route, but only to a caller the route
    admits: without a key a secured route says 401, a user key on an operator route 403,
    so what a route takes is not told to whoever asks."""
    world = sqlite_world
    refusals = Refusals(world)
    some_id = str(uuid.uuid4())
    for path, item in openapi_paths().items():
        url = re.sub(r"\{[^}]+\}", some_id, fill(path, world)) + "?unexpected=1"
        for method, operation in item.items():
            label = f"{method.upper()} {path}?unexpected=1"
            secured = bool(operation.get("security"))
            send = functools.partial(world.client.request, method.upper(), url)
            refusals.check(f"{label} without a key", send, 401 if secured else 422)
            cluster_only = path.startswith("/v1/admin/rebuilds")
            for principal in ("cluster", "operator", "user"):
                response = send(headers=world.headers(principal))
                if response.status_code == 422:
                    assert "Unknown query parameter" in response.json()["detail"], label
                else:  # a key the route does not admit: a user's, or a namespaced operator's
                    refused = principal == "user" or (principal == "operator" and cluster_only)
                    assert refused, (label, principal)
                    assert response.status_code == 403, (label, principal)
    refusals.assert_none()
    metrics = world.client.get("/metrics?x=1")
    assert metrics.status_code == 401
    assert metrics.headers["www-authenticate"] == "Bearer"
    console = world.client.get("/console/requests?x=1", follow_redirects=False)
    assert console.headers["location"] == "/console/signin"


# -- oversized input ------------------------------------------------------------------


def test_oversized_content_and_metadata_are_refused(world: World) -> None:
    refusals = Refusals(world)
    events = "/v1/events"
    refusals.json("content", "POST", events, {"content": "x" * 100_001}, 422)
    refusals.json("meta value", "POST", events, {"content": "ok", "meta": {"b": "y" * 1_500_000}})
    many = {f"k{i}": "v" * 100 for i in range(20_000)}
    refusals.json("meta keys", "POST", events, {"content": "ok", "meta": many})
    refusals.raw("5 MB body", "POST", events, b'{"content": "' + b"z" * 5_000_000 + b'"}')
    refusals.json("session id", "POST", events, {"content": "ok", "session_id": "s" * 257}, 422)
    refusals.json("query", "POST", "/v1/retrieve", {"query": "q" * 10_001}, 422)
    refusals.json("attractor", "POST", "/v1/attractors", {"text": "t" * 10_001}, 422)
    refusals.json("trigger", "POST", "/v1/triggers", {"text": "t" * 10_001}, 422)
    refusals.assert_none()
    at_limit = world.client.post(
        events, json={"content": "é" * 100_000}, headers=world.headers("user")
    )
    assert at_limit.status_code == 201, at_limit.text[:300]


# -- encodings ------------------------------------------------------------------------

UNDECODABLE: dict[str, bytes] = {
    "invalid UTF-8 bytes": b'{"content": "\xff\xfe"}',
    "Latin-1": '{"content": "café"}'.encode("latin-1"),
    "UTF-8-encoded surrogate": b'{"content": "\xed\xa0\x80"}',
    "lone surrogate escape": b'{"content": "\\ud800"}',
    "lone low surrogate escape": b'{"content": "ok \\udfff"}',
    "lone surrogate in a field name": b'{"content": "ok", "\\udc00": 1}',
    "lone surrogate in meta": b'{"content": "ok", "meta": {"k": "\\ud800"}}',
    "lone surrogate in session id": b'{"content": "ok", "session_id": "\\ud800"}',
    "truncated JSON": b'{"content": "ok"',
    "binary": b"\x00\x01\x02",
}


def test_undecodable_bodies_are_refused_without_writing(world: World) -> None:
    refusals = Refusals(world)
    for label, raw in UNDECODABLE.items():
        refusals.raw(label, "POST", "/v1/events", raw)
    refusals.raw(
        "user id",
        "POST",
        "/v1/events",
        b'{"content": "ok", "user_id": "\\ud800"}',
        principal="operator",
    )
    refusals.raw("query", "POST", "/v1/retrieve", b'{"query": "\\ud800"}')
    refusals.raw("keyword", "POST", "/v1/triggers", b'{"keyword": "\\udbff"}')
    refusals.raw(
        "form",
        "POST",
        "/v1/events",
        b"content=hello",
        content_type="application/x-www-form-urlencoded",
    )
    refusals.assert_none()


# -- values out of range ----------------------------------------------------------------

INVALID_STORES: list[dict[str, Any]] = [
    {"content": "ok", "scope": "galaxy"},
    {"content": "ok", "role": "overlord"},
    {"content": "ok", "meta": {"nested": {"a": 1}}},
    {"content": "ok", "meta": {"confidence": 2}},
    {"content": "   "},
    {"content": ""},
    {"content": 42},
    {"content": "ok", "request_id": "nope"},
]


def test_invalid_store_requests_answer_422(world: World) -> None:
    refusals = Refusals(world)
    for body in INVALID_STORES:
        refusals.json(repr(body), "POST", "/v1/events", body, 422)
    refusals.assert_none()


def test_out_of_range_paging_never_fails(world: World) -> None:
    world.shared_seed(ALICE)
    failures = []
    for after in ("-1", "9223372036854775806", "9223372036854775807", "9223372036854775808"):
        response = world.client.get(
            "/v1/events", params={"after_version": after}, headers=world.headers("user")
        )
        if response.status_code >= 500 or (response.status_code == 200 and response.json() != []):
            failures.append(f"after_version={after}: {response.status_code} {response.text[:100]}")
    assert not failures, "\n".join(failures)


def test_audit_export_time_bounds_never_fail(world: World) -> None:
    seed = world.seed(ALICE)  # an erasure puts entries in the audit stream
    deleted = world.client.delete(
        f"/v1/compliance/users/{ALICE}/memory/{seed.event_id}", headers=world.headers("user")
    )
    assert deleted.status_code in (200, 202), deleted.text
    failures = []
    for params in (
        {"since": "2020-01-01T00:00:00Z"},
        {"since": "2020-01-01T00:00:00"},
        {"since": "2020-01-01T00:00:00Z", "until": "2999-01-01T00:00:00"},
        {"since": "not-a-date"},
    ):
        response = world.client.get(
            "/v1/compliance/audit/export", params=params, headers=world.headers("auditor")
        )
        if response.status_code >= 500:
            failures.append(f"{params}: {response.status_code} {response.text[:100]}")
    assert not failures, "\n".join(failures)


def test_forget_and_delete_parameters_out_of_range_are_refused(world: World) -> None:
    seed = world.shared_seed(ALICE)
    refusals = Refusals(world)
    forget = f"/v1/compliance/users/{ALICE}/forget"
    for body in ({"wait_seconds": -1}, {"wait_seconds": 61}, {"legal_ground": "because"}):
        refusals.json(repr(body), "POST", forget, body, 422, principal="operator")
    delete = f"/v1/compliance/users/{ALICE}/memory/{seed.event_id}"
    refusals.check(
        "legal ground",
        lambda: world.client.delete(
            delete, params={"legal_ground": "because"}, headers=world.headers("user")
        ),
        422,
    )
    refusals.assert_none()
    kept = world.client.get(f"/v1/events/{seed.event_id}", headers=world.headers("user"))
    assert kept.status_code == 200


def test_wait_and_time_values_that_mean_nothing_are_refused(world: World) -> None:
    """-1 s, NaN and infinity are no waiting times, ``true`` is no number, and a bare
    number is no point in time (pydantic would read it as seconds since 1970)."""
    seed = world.shared_seed(ALICE)
    refusals = Refusals(world)
    delete = f"/v1/compliance/users/{ALICE}/memory/{seed.event_id}"
    for wait in ("-1", "nan", "NaN", "inf", "-inf", "Infinity", "61"):
        refusals.check(
            f"delete wait_seconds={wait}",
            lambda w=wait: world.client.delete(
                delete, params={"wait_seconds": w}, headers=world.headers("user")
            ),
            422,
        )
    forget = f"/v1/compliance/users/{ALICE}/forget"
    for raw in (b'{"wait_seconds": true}', b'{"wait_seconds": NaN}', b'{"wait_seconds": "5"}'):
        refusals.raw(raw.decode(), "POST", forget, raw, 422, principal="operator")
    for params in ({"since": "-1"}, {"until": "0.5"}, {"since": "1700000000"}, {"until": "1e9"}):
        refusals.check(
            f"audit export {params}",
            lambda p=params: world.client.get(
                "/v1/compliance/audit/export", params=p, headers=world.headers("auditor")
            ),
            422,
        )
    refusals.assert_none()
    kept = world.client.get(f"/v1/events/{seed.event_id}", headers=world.headers("user"))
    assert kept.status_code == 200


def test_the_published_vocabularies_are_the_policys() -> None:
    from typing import get_args

    from oblivio.http.schemas import LegalGround, Reason
    from workers.policy import LEGAL_GROUNDS, REASONS

    assert set(get_args(Reason)) == REASONS
    assert set(get_args(LegalGround)) == set(LEGAL_GROUNDS)
