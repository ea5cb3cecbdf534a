"""Schemathesis against the published OpenAPI document, in process (ASGI).

Every published operation is called with generated input, once with data the
schema allows and once with data it forbids, under an operator or a user key: no
response may be a server error, and every response must conform to the schema
the document publishes for its status code.  Operations are taken from the
document itself, so a new route is fuzzed without touching this file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from oblivio.http import create_app
from tests.http.conftest import World, open_world, settings_for

MAX_EXAMPLES = 20
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]
#: Operators reach every route; a user key lets generated bodies without a user id
#: through to the memory operations.
PRINCIPAL = st.sampled_from(["operator", "user"])


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
    with open_world(settings_for(url, data_dir)) as world:
        world.seed("alice")
        yield world


@pytest.fixture(scope="module")
def published(fuzz_world: World) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", fuzz_world.client.app)


@pytest.mark.parametrize(("method", "path", "mode"), operations())
def test_published_operation_never_fails_and_conforms(
    published: Any, fuzz_world: World, method: str, path: str, mode: GenerationMode
) -> None:
    operation = published[path][method.upper()]
    found: dict[str, str] = {}  # distinct failure → one request that shows it

    @given(case=operation.as_strategy(generation_mode=mode), principal=PRINCIPAL)
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def call(case: schemathesis.Case[Any], principal: str) -> None:
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
