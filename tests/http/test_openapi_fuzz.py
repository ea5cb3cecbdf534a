"""Schemathesis against the published OpenAPI document, in process (ASGI).

Every published operation is called with generated input, once with data the
schema allows and once with data it forbids, under an operator and under a user
key: no response may be a server error, every response must conform to the
schema the document publishes for its status code (body, headers, content type),
data the schema allows must not be refused as invalid (422), data it forbids must
be refused, and a secured operation that succeeded must refuse the same request
without a key or with a wrong one.

OpenAPI cannot make a parameter required for one credential only; operations
whose ``user_id`` an operator key must give say so in
``x-required-for-operator-keys``, and the operator is fuzzed against the
document with those members required (``operator_view``).  Operations are taken from the
document itself, so a new route is fuzzed without touching this file.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from oblivio.http import create_app
from tests.http.conftest import World, free_port, open_world, settings_for

MAX_EXAMPLES = 6  # per operation, mode and principal: at most 720 cases, about 20 s here
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    response_headers_conformance,
    content_type_conformance,
    positive_data_acceptance,
    negative_data_rejection,
    # A secured operation that answered 2xx is sent again without a key, and with a
    # wrong one: both must be refused.
    ignored_auth,
    allow_header_conformance,
]
#: Operators reach every route; a user key lets generated bodies without a user id
#: through to the memory operations.
PRINCIPALS = ["operator", "user"]


def breaks_a_stated_rule(case: schemathesis.Case[Any]) -> bool:
    """A rule between two members that JSON Schema cannot state, which the document
    states in words: ``occurred_since`` must be before ``occurred_until``."""
    members = {**(case.query or {}), **(case.body if isinstance(case.body, dict) else {})}
    since, until = members.get("occurred_since"), members.get("occurred_until")
    if not isinstance(since, str) or not isinstance(until, str):
        return False
    try:
        return datetime.fromisoformat(since) >= datetime.fromisoformat(until)
    except (ValueError, TypeError):  # naive against aware, or not a time: the schema's call
        return False


def operations() -> list[Any]:
    """(method, path, mode) for every published operation; negative data where there is input."""
    document = create_app(None).openapi()  # type: ignore[arg-type]  # schema needs no store
    cases = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            cases.append(
                pytest.param(method, path, GenerationMode.POSITIVE, id=f"{method} {path} +")
            )
            if operation.get("parameters") or operation.get("requestBody"):
                cases.append(
                    pytest.param(method, path, GenerationMode.NEGATIVE, id=f"{method} {path} -")
                )
    return cases


@pytest.fixture(scope="module")
def fuzz_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One embedded store shared by every fuzzed operation, seeded with a memory."""
    data_dir = tmp_path_factory.mktemp("fuzz")
    url = f"sqlite:///{data_dir / 'oblivio.sqlite3'}"
    # ``openai:MODEL`` is a name the server accepts: the embeddings endpoint is a loopback
    # port nothing listens on, so such a rebuild answers 409 at once and nothing leaves
    # the machine.
    offline = {"openai_base_url": f"http://127.0.0.1:{free_port()}/v1", "embedding_retries": 0}
    settings = settings_for(url, data_dir).model_copy(update=offline)
    with open_world(settings) as world:
        world.seed("alice")
        yield world


def operator_view(document: dict[str, Any]) -> dict[str, Any]:
    """The document as it applies to operator keys: ``x-required-for-operator-keys``
    members required and not nullable."""
    view = copy.deepcopy(document)
    components = view["components"]["schemas"]
    for item in view["paths"].values():
        for operation in item.values():
            names = operation.get("x-required-for-operator-keys", [])
            for parameter in operation.get("parameters", []):
                if parameter["name"] in names:
                    parameter["required"] = True
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body and names:
                schema = components[body["schema"]["$ref"].rsplit("/", 1)[-1]]
                schema["required"] = sorted({*schema.get("required", []), *names})
                for name in names:  # the non-null alternative of ``X | None``
                    member = schema["properties"][name]
                    schema["properties"][name] = next(
                        c for c in member["anyOf"] if c.get("type") != "null"
                    )
    return view


@pytest.fixture(scope="module")
def published(fuzz_world: World) -> dict[str, Any]:
    app = fuzz_world.client.app
    document = fuzz_world.client.get("/openapi.json").json()
    schemas = {}
    for principal, view in (("user", document), ("operator", operator_view(document))):
        schema = schemathesis.openapi.from_dict(view)
        schema.app = app  # calls go to the app in process, as from_asgi sets up
        schemas[principal] = schema
    return schemas


@pytest.mark.parametrize("principal", PRINCIPALS)
@pytest.mark.parametrize(("method", "path", "mode"), operations())
def test_published_operation_never_fails_and_conforms(
    published: Any, fuzz_world: World, method: str, path: str, mode: GenerationMode, principal: str
) -> None:
    operation = published[principal][path][method.upper()]
    found: dict[str, str] = {}  # distinct failure → one request that shows it

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def call(case: schemathesis.Case[Any]) -> None:
        if mode is GenerationMode.POSITIVE and breaks_a_stated_rule(case):
            return  # valid by the schema, invalid by a rule its descriptions state
        headers = fuzz_world.headers(principal)
        # Record failures instead of raising, so one failure does not hide the others.
        try:
            response = case.call(headers=headers)
        except Exception as e:  # the app raised through the ASGI transport
            found.setdefault(f"{type(e).__name__}: {e}", case.as_curl_command())
            return
        for check in CHECKS:
            try:
                case.validate_response(response, checks=[check], headers=headers)
            except FailureGroup as group:
                for failure in group.exceptions:
                    first_line = failure.message.strip().splitlines()[0] if failure.message else ""
                    key = f"[{response.status_code}] {failure.title}: {first_line}"
                    found.setdefault(key, f"{case.as_curl_command()}\n    -> {response.text[:300]}")

    call()
    assert not found, "\n".join(f"{key}\n    {example}" for key, example in found.items())
