"""The isolation matrix: two namespaces × {user, auditor, operator, cluster-wide operator}
keys × every published route and every MCP tool, on both backends.

Each namespace holds the same users (alice, bob) with their own memories.  A key of
one namespace calls every route the way the authorisation matrix calls it on its
own data (tests/http/test_authorization.py), but naming the *other* namespace's
ids, and again with those ids replaced by unknown ones.  Wanted:

* 0 cross-namespace writes: the other namespace's events, streams, erasure requests
  and revoked keys are the same after the call;
* 0 cross-namespace reads: no answer carries an id, subject reference, key id or
  memory text of the other namespace (beyond the ids the call itself named);
* 0 answers that differ between a foreign id and an unknown one (status, content
  type and body with ids masked).

The cluster-wide operator key acts in the namespace its ``Oblivio-Namespace``
header names; its key management, audit export and metrics span every namespace
by design, and re-embedding jobs belong to the whole store, so those routes are
exempt for it.  The routes come from
the published OpenAPI document (a route without a matrix row fails here), the
tools from the MCP server's own list.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from mcp.server.mcpserver import MCPServer

from appdata import apikeys, tables
from certificates import CertificateVerificationError, sign
from eventstore import exports, schema
from oblivio.cli import main
from oblivio.console import pages as console_pages
from oblivio.http.auth import NAMESPACE_HEADER
from oblivio.mcp_server import build_mcp_server
from oblivio.memory import compliance, inputs
from oblivio.memory.context import MemoryContext
from projections.storage.tables import nodes
from tests.console.conftest import sign_in
from tests.http.conftest import ALICE, ALSO_ON_CITUS, BOB, Response, World, create_key, log_size
from tests.http.test_authorization import SPECS, UUID, Call, normalised, published_operations

OTHER = "tenant-b"
AUDIT_EXPORT = "/v1/compliance/audit/export"
ADMIN_KEYS = "/v1/admin/keys"
KEYS = ("user", "operator", "auditor", "cluster")
#: Routes where a cluster-wide key acts on every namespace, by design.
SPANS_ALL = {
    ("POST", "/v1/admin/rebuilds"),
    ("GET", "/v1/admin/rebuilds/{rebuild_id}"),
    ("GET", "/v1/admin/keys"),
    ("POST", "/v1/admin/keys"),
    ("DELETE", "/v1/admin/keys/{key_id}"),
    ("GET", "/v1/compliance/audit/export"),
    ("GET", "/metrics"),
}
KEY_ID = re.compile(r"(?<=/v1/admin/keys/)[0-9a-f]{16}")


class Tenant(World):
    """One namespace of the shared store: seeds memories marked with its name, and
    sends its cluster-wide key's requests into it."""

    def seed(self, user: str, content: str | None = None) -> Any:
        text = content or f"{marker(self.ctx.namespace)} {user} ({uuid.uuid4().hex[:8]})"
        return super().seed(user, text)

    def headers(self, principal: str, **extra: str) -> dict[str, str]:
        headers = super().headers(principal, **extra)
        if principal == "cluster":
            headers[NAMESPACE_HEADER] = self.ctx.namespace
        return headers


def marker(namespace: str) -> str:
    return f"secret-of-{namespace}"


def tenants(world: World) -> tuple[Tenant, Tenant]:
    """The world's namespace and another, each with keys of every kind of its own."""
    home = Tenant(world.ctx, world.settings, world.tokens, world.client)
    other_ctx = world.ctx.tenant(OTHER, cluster_wide=True)
    tokens = {
        "user": create_key(world.ctx, "user", ALICE, namespace=OTHER),
        "other_user": create_key(world.ctx, "user", BOB, namespace=OTHER),
        "operator": create_key(world.ctx, "operator", namespace=OTHER),
        "auditor": create_key(world.ctx, "auditor", namespace=OTHER),
        "cluster": world.tokens["cluster"],
    }
    return home, Tenant(other_ctx, world.settings, tokens, world.client)


# -- what a namespace holds -----------------------------------------------------------


def holdings(ctx: MemoryContext, namespace: str) -> tuple[int, ...]:
    """What a write to ``namespace`` would change: its events, streams, erasure
    requests and revoked keys."""
    in_namespace = schema.streams.c.namespace == namespace
    queries = [
        sa.select(sa.func.count())
        .select_from(schema.events.join(schema.streams))
        .where(in_namespace),
        sa.select(sa.func.count()).select_from(schema.streams).where(in_namespace),
        sa.select(sa.func.count())
        .select_from(schema.erasure_requests)
        .where(schema.erasure_requests.c.namespace == namespace),
        sa.select(sa.func.count())
        .select_from(tables.api_keys)
        .where(tables.api_keys.c.namespace == namespace, tables.api_keys.c.revoked_at.is_not(None)),
    ]
    with ctx.store.reading() as view:
        return tuple(int(view.connection.execute(q).scalar_one()) for q in queries)


def secrets_of(ctx: MemoryContext, namespace: str) -> set[str]:
    """Every identifier and text of ``namespace`` another namespace must never see."""
    streams = schema.streams
    ids = [
        sa.select(schema.events.c.event_id).join(streams).where(streams.c.namespace == namespace),
        sa.select(nodes.c.node_id)
        .join(streams, streams.c.stream_id == nodes.c.stream_id)
        .where(streams.c.namespace == namespace),
        sa.select(schema.erasure_requests.c.request_id).where(
            schema.erasure_requests.c.namespace == namespace
        ),
        sa.select(schema.certificates.c.certificate_id)
        .join(
            schema.erasure_requests,
            schema.erasure_requests.c.request_id == schema.certificates.c.request_id,
        )
        .where(schema.erasure_requests.c.namespace == namespace),
        sa.select(tables.api_keys.c.key_id).where(tables.api_keys.c.namespace == namespace),
    ]
    keys = sa.select(streams.c.subject_key).where(streams.c.namespace == namespace)
    with ctx.store.reading() as view:
        found = {str(value) for query in ids for value in view.connection.execute(query).scalars()}
        found |= {key.hex() for key in view.connection.execute(keys).scalars()}
    return found | {marker(namespace)}


@dataclass
class Findings:
    problems: list[str]

    def check(
        self,
        label: str,
        foreign: tuple[object, str],
        unknown: tuple[object, str] | None,
        asked: str,
        secrets: set[str],
        writes: tuple[tuple[int, ...], tuple[int, ...]],
    ) -> None:
        """One foreign call's outcome against the three rules (``asked``: what the call
        itself said, whose ids an answer may echo)."""
        if writes[0] != writes[1]:
            self.problems.append(f"{label}: wrote to the other namespace {writes}")
        leaked = sorted(s for s in secrets if s in foreign[1] and s not in asked)
        if leaked:
            self.problems.append(f"{label}: answered the other namespace's {leaked[:3]}")
        if unknown is not None and masked(foreign) != masked(unknown):
            self.problems.append(
                f"{label}: a foreign id answers {masked(foreign)} but an unknown one "
                f"{masked(unknown)}"
            )


def masked(outcome: tuple[object, str]) -> tuple[object, str]:
    return outcome[0], UUID.sub("<id>", outcome[1])


# -- HTTP -------------------------------------------------------------------------------


def unknown_twin(call: Call) -> Call | None:
    """``call`` with every id replaced by one that exists nowhere; None without ids."""
    text = json.dumps([call.url, call.params, call.json])
    if not UUID.search(text) and not KEY_ID.search(call.url):
        return None
    fresh: dict[str, str] = {}
    twin = UUID.sub(lambda m: fresh.setdefault(m.group(), str(uuid.uuid4())), text)
    url, params, body = json.loads(twin)
    return Call(call.method, KEY_ID.sub("0" * 16, url), params, body, call.headers)


def outcome(response: Response) -> tuple[object, str]:
    status, content_type, _ = normalised(response)
    return (status, content_type), response.text


def check_routes(
    here: Tenant,
    there: Tenant,
    findings: Findings,
    routes: Collection[tuple[str, str]] | None = None,
    principals: Collection[str] = KEYS,
) -> None:
    """Every published route (or ``routes``) as each principal of ``here`` (or ``principals``)."""
    for key in published_operations() if routes is None else routes:
        spec = SPECS[key]  # every published route has a row: a new one fails here
        for principal in principals:
            if principal == "cluster" and key in SPANS_ALL:
                continue
            label = f"{key[0]} {key[1]} as {here.ctx.namespace}'s {principal}"
            foreign = spec.own(there, ALICE)  # the other namespace's ids, named here
            twin = unknown_twin(foreign)
            before = holdings(here.ctx, there.ctx.namespace)
            got = foreign.send(here, principal)
            after = holdings(here.ctx, there.ctx.namespace)
            if got.status_code >= 500:
                findings.problems.append(f"{label}: server error {got.text[:200]}")
            absent = None if twin is None else outcome(twin.send(here, principal))
            findings.check(
                label,
                outcome(got),
                absent,
                str(foreign),
                secrets_of(here.ctx, there.ctx.namespace),
                (before, after),
            )


# -- MCP --------------------------------------------------------------------------------


def tool_arguments(
    schema_: dict[str, Any], ids: dict[str, str], user: str | None
) -> dict[str, Any]:
    """Arguments for a tool from its input schema: ids from ``ids`` (by the kind the
    parameter's name says), the user, and a short text for every other required string."""
    arguments: dict[str, Any] = {}
    required = set(schema_.get("required", ()))
    for name, prop in schema_.get("properties", {}).items():
        kind = next((k for k in ("node", "event", "evidence") if k in name), None)
        if "uuid" in json.dumps(prop) and kind is not None:
            arguments[name] = ids[kind]
        elif name == "user_id" and user is not None:
            arguments[name] = user
        elif name in required:
            arguments[name] = "tea"
    return arguments


def call_tool(server: MCPServer, name: str, arguments: dict[str, Any]) -> tuple[object, str]:
    try:
        result = asyncio.run(server.call_tool(name, arguments))
    except Exception as error:  # a refused call: ToolError naming the typed error
        return ("error", str(error))
    text = "".join(getattr(part, "text", "") for part in getattr(result, "content", ()))
    return (bool(getattr(result, "is_error", False)), text)


def check_tools(here: Tenant, there: Tenant, findings: Findings) -> None:
    for principal in ("user", "operator", "cluster"):  # auditors have no tools
        who = apikeys.authenticate_token(here.ctx.store, here.tokens[principal], here.ctx.clock())
        assert who is not None
        server = build_mcp_server(here.ctx.tenant(here.ctx.namespace, cluster_wide=True), who)
        user = None if principal == "user" else ALICE
        for tool in asyncio.run(server.list_tools()):
            label = f"MCP {tool.name} as {here.ctx.namespace}'s {principal}"
            seed = there.seed(ALICE)
            foreign_ids = {"node": str(seed.node_id), "event": str(seed.event_id)}
            foreign_ids["evidence"] = foreign_ids["event"]
            unknown_ids = {kind: str(uuid.uuid4()) for kind in foreign_ids}
            foreign = tool_arguments(tool.input_schema, foreign_ids, user)
            before = holdings(here.ctx, there.ctx.namespace)
            got = call_tool(server, tool.name, foreign)
            after = holdings(here.ctx, there.ctx.namespace)
            twin = tool_arguments(tool.input_schema, unknown_ids, user)
            absent = None if twin == foreign else call_tool(server, tool.name, twin)
            findings.check(
                label,
                got,
                absent,
                json.dumps(foreign),
                secrets_of(here.ctx, there.ctx.namespace),
                (before, after),
            )


# -- the matrix ------------------------------------------------------------------------


@pytest.fixture
def pair(world: World) -> tuple[Tenant, Tenant]:
    home, other = tenants(world)
    for tenant in (home, other):  # both namespaces hold the same people
        tenant.shared_seed(ALICE)
        tenant.shared_seed(BOB)
    return home, other


# Not on the Citus tier: 40 to 90 s there, where tests/citus/test_cross_owner.py runs
# the reading routes' checks in a few seconds (namespace filters are the same SQL on
# every backend; what the cluster changes is where a read is routed).
@pytest.mark.parametrize("check", [check_routes, check_tools], ids=["routes", "mcp-tools"])
def test_nothing_reads_or_writes_across_namespaces(
    pair: tuple[Tenant, Tenant], check: Callable[[Tenant, Tenant, Findings], None]
) -> None:
    home, other = pair
    findings = Findings([])
    check(home, other, findings)
    check(other, home, findings)
    assert not findings.problems, "\n".join(findings.problems)


@ALSO_ON_CITUS
def test_keys_of_one_namespace_are_invisible_to_another(pair: tuple[Tenant, Tenant]) -> None:
    home, _ = pair
    listed = home.client.get("/v1/admin/keys", headers=home.headers("operator")).json()
    assert {k["namespace"] for k in listed} == {home.ctx.namespace}
    everything = home.client.get("/v1/admin/keys", headers=home.headers("cluster")).json()
    assert {k["namespace"] for k in everything} == {home.ctx.namespace, OTHER, None}
    with home.ctx.store.reading() as view:
        assert apikeys.list_keys(view.connection, OTHER) == [
            k for k in apikeys.list_keys(view.connection, None) if k.namespace == OTHER
        ]


@ALSO_ON_CITUS
def test_a_namespace_audit_export_holds_its_entries_each_in_the_signed_chain(
    pair: tuple[Tenant, Tenant], tmp_path: Path
) -> None:
    home, other = pair
    mine, theirs = home.erasure_request(ALICE), other.erasure_request(ALICE)
    jwks = compliance.jwks(home.ctx)
    text = home.client.get(AUDIT_EXPORT, headers=home.headers("auditor")).text
    manifest = compliance.verify_audit_export(text, jwks)
    lines = [json.loads(line) for line in text.splitlines()[:-1]]
    assert manifest["namespace"] == home.ctx.namespace
    assert {line["namespace"] for line in lines} == {home.ctx.namespace}
    assert str(mine) in text
    assert str(theirs) not in text
    # Other namespaces' entries lie between these: each line stands on its own link.
    assert exports.chain_problem(lines, None) is None
    unlinked = [{**line, "previous_chain_hash": "00" * 32} for line in lines]
    assert exports.chain_problem(unlinked, None) is not None
    (tmp_path / "audit.jsonl").write_text(text)
    (tmp_path / "jwks.json").write_text(json.dumps(jwks))
    files = [str(tmp_path / "audit.jsonl"), "--jwks", str(tmp_path / "jwks.json")]
    checked = CliRunner().invoke(main, ["verify-export", *files])
    assert checked.exit_code == 0, checked.output
    assert f"audit entries of {home.ctx.namespace}," in checked.output

    everything = home.client.get(AUDIT_EXPORT, headers=home.headers("cluster")).text
    spanning = compliance.verify_audit_export(everything, jwks)
    labels = {json.loads(line)["namespace"] for line in everything.splitlines()[:-1]}
    assert spanning["namespace"] is None
    assert {home.ctx.namespace, OTHER} <= labels
    assert spanning["chain_head"] == manifest["chain_head"]


def resigned(home: Tenant, body: list[str], manifest: dict[str, Any]) -> str:
    """An export of ``body`` under ``manifest`` re-signed with the issuer's key: only
    the hash chain can then tell a change."""
    lines = [json.loads(line) for line in body]
    manifest = {
        **manifest,
        "count": len(body),
        "lines_sha256": hashlib.sha256("".join(body).encode()).hexdigest(),
        "last_chain_hash": lines[-1]["chain_hash"] if lines else None,
    }
    signed = sign(manifest, home.ctx.issuer.active, typ=compliance.AUDIT_EXPORT_TYP)
    return "".join(body) + exports.dumps_line({"manifest": signed}) + "\n"


@ALSO_ON_CITUS
def test_a_namespace_audit_export_recomputes_the_chain_through_gap_records(
    pair: tuple[Tenant, Tenant],
) -> None:
    home, other = pair
    mine = [home.erasure_request(ALICE)]
    theirs = [other.erasure_request(ALICE)]
    mine.append(home.erasure_request(BOB))
    theirs += [other.erasure_request(BOB), other.erasure_request(ALICE)]
    mine.append(home.erasure_request(ALICE))
    theirs.append(other.erasure_request(BOB))  # after the last exported line: up to the head
    jwks = compliance.jwks(home.ctx)
    text = home.client.get(AUDIT_EXPORT, headers=home.headers("auditor")).text
    manifest = compliance.verify_audit_export(text, jwks)
    body = text.splitlines(keepends=True)[:-1]
    lines = [json.loads(line) for line in body]
    gaps = manifest["gaps"]
    assert all(str(request) in text for request in mine)
    assert gaps, "other namespaces' entries lie between and after the exported lines"
    assert {line["version"] for line in lines} | {gap["version"] for gap in gaps} == set(
        range(lines[0]["version"], manifest["head_version"] + 1)
    )
    assert (
        exports.gapped_chain_problem(lines, gaps, manifest["chain_head"], manifest["head_version"])
        is None
    )
    # Gap records hold the chain's inputs and nothing of the other namespace.
    fields = {"event_id", "version", "type", "schema_version", "recorded_at", "digest"}
    assert all(set(gap) == fields for gap in gaps)
    assert OTHER not in text
    assert marker(OTHER) not in text
    for user in (ALICE, BOB):
        assert user not in text
        assert other.ctx.store.subject_ref(OTHER, inputs.user(user)) not in text
    assert not any(str(request) in text for request in theirs)
    signed_text = json.dumps(manifest)
    assert OTHER not in signed_text
    assert not any(str(request) in signed_text for request in theirs)

    def refused(changed: str, reason: str) -> None:
        with pytest.raises(compliance.ExportVerificationError, match=reason):
            compliance.verify_audit_export(changed, jwks)

    # Unsigned changes to the gap records break the signature.
    payload = dict(manifest)
    altered = [dict(gap) for gap in gaps]
    altered[0]["digest"] = ("1" if altered[0]["digest"][0] == "0" else "0") + altered[0]["digest"][
        1:
    ]
    jws = json.loads(text.splitlines()[-1])["manifest"]
    forged_payload = json.dumps({**payload, "gaps": altered}, sort_keys=True).encode()
    jws = {**jws, "payload": base64.urlsafe_b64encode(forged_payload).rstrip(b"=").decode()}
    forged = "".join(body) + json.dumps({"manifest": jws}) + "\n"
    with pytest.raises((compliance.ExportVerificationError, CertificateVerificationError)):
        compliance.verify_audit_export(forged, jwks)
    # Re-signed by the issuer itself, the chain still refuses, naming why.
    assert compliance.verify_audit_export(resigned(home, body, payload), jwks) == payload
    refused(resigned(home, body, {**payload, "gaps": altered}), "hash chain is broken")
    for index in (0, len(gaps) - 1):
        dropped = gaps[:index] + gaps[index + 1 :]
        refused(resigned(home, body, {**payload, "gaps": dropped}), "hash chain is broken")
    if len(gaps) > 1:
        reordered = [gaps[1], gaps[0], *gaps[2:]]
        refused(resigned(home, body, {**payload, "gaps": reordered}), "dropped or reordered")
    for index in (1, len(body) - 1):
        refused(resigned(home, body[:index] + body[index + 1 :], payload), "hash chain is broken")
    wrong_head = {**payload, "chain_head": "00" * 32}
    refused(resigned(home, body, wrong_head), "does not end at the signed head")


def test_only_a_cluster_wide_key_creates_cluster_wide_keys(pair: tuple[Tenant, Tenant]) -> None:
    home, _ = pair
    wanted = {"principal": "operator", "cluster_wide": True}
    before = log_size(home.ctx)
    refused = home.client.post(ADMIN_KEYS, json=wanted, headers=home.headers("operator"))
    assert refused.status_code == 403, refused.text
    not_operator = {"principal": "auditor", "cluster_wide": True}
    assert (
        home.client.post(ADMIN_KEYS, json=not_operator, headers=home.headers("cluster")).status_code
        == 422
    )
    assert log_size(home.ctx) == before
    made = home.client.post(ADMIN_KEYS, json=wanted, headers=home.headers("cluster"))
    assert made.status_code == 201, made.text
    assert made.json()["key"]["namespace"] is None
    [entry] = [
        e.data or {}
        for e in home.ctx.store.read_audit()
        if (e.data or {}).get("object_refs", {}).get("api_key") == made.json()["key"]["key_id"]
    ]
    assert entry["object_refs"]["scope"] == "cluster-wide"
    mine = home.client.post(
        ADMIN_KEYS, json={"principal": "auditor"}, headers=home.headers("operator")
    )
    assert mine.json()["key"]["namespace"] == home.ctx.namespace


@ALSO_ON_CITUS
def test_a_namespaced_key_cannot_name_another_namespace(pair: tuple[Tenant, Tenant]) -> None:
    home, other = pair
    node = other.shared_seed(ALICE).node_id
    for principal in ("user", "operator", "auditor"):
        crossing = {**home.headers(principal), NAMESPACE_HEADER: OTHER}
        assert home.client.get(f"/v1/nodes/{node}", headers=crossing).status_code == 403
    assert home.client.get(f"/v1/nodes/{node}", headers=other.headers("cluster")).status_code == 200
    malformed = {**home.headers("cluster"), NAMESPACE_HEADER: "Not A Namespace"}
    assert home.client.get(f"/v1/nodes/{node}", headers=malformed).status_code == 422


@ALSO_ON_CITUS
def test_no_console_page_shows_another_namespace(pair: tuple[Tenant, Tenant]) -> None:
    """Every console page a signed-in key can open, from the app's own routes: the same
    rules as the API's (the console runs the same operations)."""
    home, other = pair
    ids = {"request_id": other.erasure_request(ALICE), "certificate_id": other.certificate(ALICE)}
    pages = [
        route.path
        for route in console_pages.router.routes
        if isinstance(route, APIRoute) and "GET" in route.methods
    ]
    assert len(pages) > 10, pages
    findings = Findings([])
    for principal in KEYS:
        browser = TestClient(home.client.app, raise_server_exceptions=False)
        assert sign_in(browser, home.tokens[principal]).status_code == 303
        for path in pages:
            foreign = path.format(**ids)
            unknown = path.format(**{name: uuid.uuid4() for name in ids})
            before = holdings(home.ctx, OTHER)
            got = browser.get(foreign)
            after = holdings(home.ctx, OTHER)
            absent = None if foreign == unknown else outcome(browser.get(unknown))
            label = f"console {path} as {principal}"
            if principal == "cluster" and "{" not in path:
                continue  # its listings span every namespace by design; its ids do not
            findings.check(
                label, outcome(got), absent, foreign, secrets_of(home.ctx, OTHER), (before, after)
            )
    assert not findings.problems, "\n".join(findings.problems)
