"""The structure DESIGN §1 and docs/architecture.md promise, read from the source.

Each rule names the modules it holds for; a change that breaks one fails here, not in a
review months later.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Modules that belong to one projection: its class, its stores.
ONE_PROJECTION = {
    "projections.graph",
    "projections.vectors",
    "projections.storage.graph_store",
    "projections.storage.vector_store",
    "projections.storage.claim_store",
    "projections.storage.item_store",
}
ONE_PROJECTION_NAMES = {"NodeGraphProjection", "VectorProjection", "GraphStore", "VectorStore"}

#: What erases, rebuilds, replays and certifies: it reaches projections through the
#: port and the registry only.
PORT_USERS = [
    "workers/erasure.py",
    "workers/rebuild.py",
    "workers/replay.py",
    "workers/certify.py",
    "projections/registry.py",
]

#: The application's own tables, whose home is appdata/ (not the log's package).
APPLICATION_TABLES = {"api_keys", "console_sessions", "scheduler_leases", "apscheduler_jobs"}

#: The packages of this project, which integrations reach only through the facade.
OURS = ("oblivio", "eventstore", "projections", "workers", "appdata", "certificates")
PUBLIC_FACADE = ("oblivio", "oblivio.errors")


def modules(folder: str) -> Iterator[Path]:
    yield from sorted(p for p in (ROOT / folder).rglob("*.py") if "migrations" not in p.parts)


def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    found: set[str] = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_the_application_layer_imports_no_projection_store() -> None:
    offending = {
        str(path.relative_to(ROOT)): sorted(m for m in imported(path) if "projections.storage" in m)
        for path in modules("oblivio/memory")
    }
    assert {k: v for k, v in offending.items() if v} == {}


@pytest.mark.parametrize("module", PORT_USERS)
def test_erasure_replay_and_certificates_name_no_projection(module: str) -> None:
    path = ROOT / module
    assert not imported(path) & ONE_PROJECTION
    names = {n.id for n in ast.walk(tree(path)) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree(path)) if isinstance(n, ast.Attribute)}
    assert not names & ONE_PROJECTION_NAMES  # no isinstance on one, no store of one


def test_the_log_package_defines_no_application_table() -> None:
    defined = set()
    for path in modules("eventstore"):
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Table":
                first = node.args[0] if node.args else None
                if isinstance(first, ast.Constant):
                    defined.add(first.value)
    assert defined, "the log's tables are read from eventstore/schema.py"
    assert not defined & APPLICATION_TABLES


def test_integrations_use_only_the_public_facade() -> None:
    for path in modules("oblivio/integrations"):
        ours = {m for m in imported(path) if m.split(".")[0] in OURS}
        outside = {
            m
            for m in ours
            if not m.startswith("oblivio.integrations")
            and m not in PUBLIC_FACADE
            and m.rsplit(".", 1)[0] not in PUBLIC_FACADE  # a name the facade hands on
        }
        assert not outside, f"{path.name} reaches past the facade: {sorted(outside)}"


def test_one_module_writes_job_leases() -> None:
    """Only eventstore/leased_work.py sets a lease (the table's schema declares it)."""
    writers = []
    for folder in ("eventstore", "projections", "appdata", "workers", "oblivio"):
        for path in modules(folder):
            for node in ast.walk(tree(path)):
                if isinstance(node, ast.keyword) and node.arg == "lease_expires_at":
                    writers.append(str(path.relative_to(ROOT)))
    assert set(writers) == {"eventstore/leased_work.py"}


def runtime_imports(path: Path) -> set[str]:
    """The modules ``path`` imports when it runs (not those under ``if TYPE_CHECKING``)."""
    found: set[str] = set()
    pending: list[ast.AST] = [tree(path)]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        pending.extend(ast.iter_child_nodes(node))
    return found


def test_the_application_package_touches_no_sqlalchemy() -> None:
    """DESIGN §1: SQL is the log's, the projection tables' and appdata's; the application
    (``oblivio/``) reaches a database only through them (types aside)."""
    touching = sorted(
        str(path.relative_to(ROOT))
        for path in modules("oblivio")
        if any(m.split(".")[0] == "sqlalchemy" for m in runtime_imports(path))
    )
    assert touching == []
