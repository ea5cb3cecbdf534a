"""The deployment files and the reference docs say what the code does.

* ``compose.yaml`` parses and runs PostgreSQL (with a health check), a one-shot
  ``migrate``, the ``api`` and the ``worker`` from the repository's Dockerfile;
* every route of the HTTP application appears in docs/http.md as ``METHOD /path``;
* every ``OBLIVIO_*`` environment variable the packages read appears in
  docs/operations.md;
* every ``oblivio …`` command line in the shell blocks of these docs and in
  ``compose.yaml`` parses with the real CLI;
* ``oblivio demo`` runs and its certificate verifies; ``MemoryClient`` imports and opens.

Each comparison is between two sets, so a new route, variable or command that is
not documented fails here; the ``*_check_*`` tests show the comparisons can fail.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from oblivio.cli import main
from tests.test_docs import fenced_blocks

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
COMPOSE = ROOT / "compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"
PACKAGES = ("oblivio", "eventstore", "projections", "workers", "certificates")
#: Documents written for operators and integrators whose shell examples are checked.
REFERENCE_DOCS = ("quickstart", "concepts", "http", "operations", "scaling", "gdpr")
#: FastAPI's own pages, not part of the API.
FRAMEWORK_ROUTES = frozenset({"/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"})
ENV_VAR = re.compile(r"\bOBLIVIO_[A-Z0-9_]*[A-Z0-9]\b")
#: Variables only the test suite reads (documented in README.md).
TEST_ONLY_VARS = frozenset({"OBLIVIO_TEST_DATABASE_URL", "OBLIVIO_REQUIRE_POSTGRES"})


def doc(name: str) -> str:
    return (DOCS / f"{name}.md").read_text(encoding="utf-8")


# -- compose.yaml ----------------------------------------------------------------------


def compose() -> dict[str, Any]:
    import yaml  # PyYAML, installed with the test extra (schemathesis needs it)

    loaded = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict), "compose.yaml must be a mapping"
    return loaded


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """``depends_on`` in either form, as {service: condition}."""
    found = service.get("depends_on", {})
    if isinstance(found, list):
        return dict.fromkeys(found, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in found.items()}


def environment(service: dict[str, Any]) -> dict[str, str]:
    found = service.get("environment", {})
    if isinstance(found, list):
        return dict(item.partition("=")[::2] for item in found)
    return {name: "" if value is None else str(value) for name, value in found.items()}


def command_words(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else [str(w) for w in command]


def test_compose_runs_postgres_migrate_api_and_worker() -> None:
    services = compose()["services"]
    assert {"postgres", "migrate", "api", "worker"} <= set(services)

    postgres = services["postgres"]
    assert str(postgres["image"]).startswith("postgres:16")
    assert postgres["healthcheck"]["test"], "postgres needs a health check"

    migrate = services["migrate"]
    assert command_words(migrate)[-2:] == ["db", "upgrade"]
    assert depends_on(migrate) == {"postgres": "service_healthy"}
    assert migrate.get("restart", "no") == "no", "migrate is a one-shot service"

    for name in ("api", "worker"):
        service = services[name]
        needs = depends_on(service)
        assert needs.get("postgres") == "service_healthy", name
        assert needs.get("migrate") == "service_completed_successfully", name
        env = environment(service)
        for var in (
            "OBLIVIO_DATABASE_URL",
            "OBLIVIO_KEKS",
            "OBLIVIO_SUBJECT_HMAC_KEY",
            "OBLIVIO_ISSUER_KEYS",
        ):
            assert env.get(var), f"{name} needs {var}"
    assert command_words(services["api"])[:2] == ["oblivio", "serve"]
    assert "0.0.0.0" in command_words(services["api"])
    assert command_words(services["worker"]) == ["oblivio", "worker"]


def test_compose_citus_profile_runs_oblivio_on_a_coordinator_and_two_workers() -> None:
    services = compose()["services"]
    in_profile = {n for n, s in services.items() if "citus" in s.get("profiles", ())}
    nodes = ["citus-coordinator", "citus-worker-1", "citus-worker-2"]
    assert in_profile == {*nodes, "citus-register", "migrate-citus", "api-citus", "worker-citus"}
    assert not any(services[n].get("profiles") for n in ("postgres", "migrate", "api", "worker"))

    for name in nodes:
        node = services[name]
        assert str(node["image"]).startswith("citusdata/citus:13."), name
        assert node["healthcheck"]["test"], name
        settings = " ".join(command_words(node))
        assert "max_prepared_transactions=" in settings, name  # two-phase commits
        assert "wal_level=logical" in settings, name  # shard moves
        assert environment(node)["POSTGRES_DB"] == "oblivio", name
    assert len({str(services[n]["volumes"]) for n in nodes}) == 3, "a data volume per node"

    register = services["citus-register"]
    assert depends_on(register) == dict.fromkeys(nodes, "service_healthy")
    assert register.get("restart", "no") == "no", "registration is a one-shot service"
    script = " ".join(command_words(register))
    assert "citus_set_coordinator_host('citus-coordinator', 5432)" in script
    for worker in nodes[1:]:
        assert f"citus_add_node('{worker}', 5432)" in script

    migrate = services["migrate-citus"]
    assert command_words(migrate)[-2:] == ["db", "upgrade"]
    assert depends_on(migrate) == {"citus-register": "service_completed_successfully"}
    for name in ("migrate-citus", "api-citus", "worker-citus"):
        url = environment(services[name])["OBLIVIO_DATABASE_URL"]
        assert "@citus-coordinator:5432/oblivio" in url, f"{name} must reach the coordinator only"
        plain = environment(services[name.removesuffix("-citus")])
        assert set(environment(services[name])) == set(plain), name  # the same settings
    for name in ("api-citus", "worker-citus"):
        assert depends_on(services[name]) == {"migrate-citus": "service_completed_successfully"}
        assert command_words(services[name]) == command_words(services[name.removesuffix("-citus")])


def test_compose_builds_the_repository_image() -> None:
    services = compose()["services"]
    for name in ("migrate", "api", "worker"):
        build = services[name].get("build")
        if build is None:  # reuses the image another service builds
            assert services[name]["image"] == services["api"]["image"], name
            continue
        context = build if isinstance(build, str) else build.get("context", ".")
        assert (ROOT / context / "Dockerfile").resolve() == DOCKERFILE, name
    dockerfile = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim\b", dockerfile, re.MULTILINE)
    assert "'.[postgres]'" in dockerfile or '".[postgres]"' in dockerfile


def test_compose_names_only_variables_oblivio_reads() -> None:
    named = set(ENV_VAR.findall(COMPOSE.read_text(encoding="utf-8")))
    unknown = named - variables_read_by_the_code()
    assert not unknown, f"compose.yaml sets variables nothing reads: {sorted(unknown)}"


# -- routes ------------------------------------------------------------------------------


def route_table(routes: Iterable[Any]) -> set[tuple[str, str]]:
    """(METHOD, path) of every route, descending into included routers."""
    try:  # FastAPI keeps included routers nested and exposes a flattening iterator
        from fastapi.routing import iter_route_contexts

        flat: Iterable[Any] = iter_route_contexts(list(routes))
    except ImportError:  # older FastAPI copies included routes into app.routes
        flat = routes
    table = set()
    for route in flat:
        methods = set(route.methods or ())
        if "GET" in methods:
            methods.discard("HEAD")  # implied by GET
        # A converter ("{key:path}") is not part of the published path ("{key}").
        path = CONVERTER.sub("}", route.path)
        table |= {(method, path) for method in methods}
    return table


CONVERTER = re.compile(r":\w+}")


@pytest.fixture(scope="module")
def app_routes(tmp_path_factory: pytest.TempPathFactory) -> set[tuple[str, str]]:
    from oblivio.bootstrap import open_memory
    from oblivio.http import create_app
    from oblivio.settings import Settings

    memory = open_memory(Settings(data_dir=tmp_path_factory.mktemp("routes")))
    try:
        app = create_app(memory)
        table = route_table(app.routes)
        published = {
            (method.upper(), path)
            for path, operations in app.openapi()["paths"].items()
            for method in operations
        }
    finally:
        memory.store.close()
    # The walk must see at least what the OpenAPI document publishes.
    assert published <= table, f"routes missed by the walk: {sorted(published - table)}"
    return {(method, path) for method, path in table if path not in FRAMEWORK_ROUTES}


def is_route_documented(method: str, path: str, text: str) -> bool:
    # "GET /v1/events" must not count as documented by "GET /v1/events/{event_id}".
    return re.search(rf"\b{method} {re.escape(path)}(?![\w/{{}}-])", text) is not None


def undocumented_routes(routes: Iterable[tuple[str, str]], text: str) -> list[str]:
    return sorted(f"{m} {p}" for m, p in routes if not is_route_documented(m, p, text))


def test_every_route_is_in_the_http_reference(app_routes: set[tuple[str, str]]) -> None:
    assert ("GET", "/v1/health") in app_routes
    assert ("PUT", "/v1/nodes/{node_id}/reinforce") in app_routes
    missing = undocumented_routes(app_routes, doc("http"))
    assert missing == [], "document these routes in docs/http.md as 'METHOD /path'"


def test_the_route_check_can_fail() -> None:
    routes = {("GET", "/v1/events"), ("GET", "/v1/events/{event_id}")}
    assert undocumented_routes(routes, "`GET /v1/events/{event_id}` — one event") == [
        "GET /v1/events"
    ]
    assert undocumented_routes(routes, "`POST /v1/events` and GET /v1/events/{event_id}") == [
        "GET /v1/events"
    ]
    assert undocumented_routes(routes, "GET /v1/events, GET /v1/events/{event_id}.") == []


# -- environment variables -----------------------------------------------------------


def python_sources() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def variables_read_by_the_code() -> set[str]:
    found: set[str] = set()
    for path in python_sources():
        found |= set(ENV_VAR.findall(path.read_text(encoding="utf-8")))
    return found


def undocumented_variables(variables: Iterable[str], text: str) -> list[str]:
    documented = set(ENV_VAR.findall(text))
    return sorted(set(variables) - documented)


def test_every_environment_variable_is_in_the_operations_guide() -> None:
    variables = variables_read_by_the_code()
    assert {"OBLIVIO_DATABASE_URL", "OBLIVIO_KEKS", "OBLIVIO_API_KEY"} <= variables
    assert not variables & TEST_ONLY_VARS, "test-only variables belong in tests/"
    missing = undocumented_variables(variables, doc("operations"))
    assert missing == [], "document these variables in docs/operations.md"


def test_the_variable_check_can_fail() -> None:
    variables = {"OBLIVIO_KEKS", "OBLIVIO_KEK_RETIRE_DAYS"}
    assert undocumented_variables(variables, "`OBLIVIO_KEKS`, `OBLIVIO_KEK_ROTATE_DAYS`") == [
        "OBLIVIO_KEK_RETIRE_DAYS"
    ]
    # A longer name does not document its prefix.
    assert undocumented_variables({"OBLIVIO_KEKS"}, "OBLIVIO_KEKS_FILE") == ["OBLIVIO_KEKS"]


# -- command lines -------------------------------------------------------------------

_COMMAND = re.compile(r"(?:^|[\s/(])oblivio(\s[^|&;>#\\)]*)")


def command_lines(shell: str) -> list[list[str]]:
    """The arguments of every ``oblivio …`` invocation in a shell snippet."""
    found = []
    for line in shell.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for match in _COMMAND.finditer(line):
            found.append(shlex.split(match.group(1)))
    return found


def documented_command_lines() -> list[tuple[str, list[str]]]:
    lines = []
    for name in REFERENCE_DOCS:
        for block in fenced_blocks(doc(name)):
            if block.lang in ("sh", "bash", "shell", "console"):
                lines += [(f"docs/{name}.md", args) for args in command_lines(block.code)]
    for service_name, service in compose()["services"].items():
        words = command_words(service)
        if words[:1] == ["oblivio"]:
            lines.append((f"compose.yaml {service_name}", words[1:]))
    return lines


def parses(args: list[str]) -> tuple[bool, str]:
    # --help is eager: the command path and every option before it are checked,
    # nothing runs.
    result = CliRunner().invoke(main, [*args, "--help"])
    return result.exit_code == 0, result.output


def test_every_documented_command_line_parses() -> None:
    lines = documented_command_lines()
    assert len(lines) >= 20, lines
    failures = []
    for where, args in lines:
        ok, output = parses(args)
        if not ok:
            failures.append(f"{where}: oblivio {shlex.join(args)}\n{output}")
    assert not failures, "\n".join(failures)


def test_the_command_line_check_can_fail() -> None:
    assert command_lines("OBLIVIO_API_KEY=$KEY .venv/bin/oblivio mcp | tee log") == [["mcp"]]
    assert command_lines("KEY=$(oblivio keys create --principal auditor)") == [
        ["keys", "create", "--principal", "auditor"]
    ]
    assert parses(["keys", "create", "--principal", "user", "--user-id", "alice"])[0]
    assert not parses(["keys", "make"])[0]
    assert not parses(["forget", "--everything", "alice"])[0]


# -- running it ----------------------------------------------------------------------


@pytest.fixture
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OBLIVIO_* setting of the machine leaks into the embedded store under test."""
    for var in variables_read_by_the_code():
        monkeypatch.delenv(var, raising=False)


@pytest.mark.usefixtures("clean_environment")
def test_the_demo_runs_and_its_certificate_verifies(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--data-dir", str(tmp_path / "data"), "demo"])
    assert result.exit_code == 0, result.output
    assert "certificate verifies" in result.output
    assert "After forgetting, retrieval returns 0 memories." in result.output


@pytest.mark.usefixtures("clean_environment")
def test_the_python_facade_of_the_quickstart_opens_a_store(
    tmp_path: Path, keyring_dir: Path
) -> None:
    from oblivio import MemoryClient

    with MemoryClient(tmp_path / "memory") as memory:
        memory.store("Alice prefers window seats.", user_id="alice")
        [hit] = memory.retrieve("seat", user_id="alice").results
        keyring = memory.context.store.codec.keys
    assert hit.node.content == "Alice prefers window seats."
    # Without OBLIVIO_KEYRING_DIR, the keyring goes to $XDG_CONFIG_HOME, not the data.
    assert not list((tmp_path / "memory").glob("keyring*"))
    assert keyring.path.parent == keyring_dir  # type: ignore[attr-defined]
