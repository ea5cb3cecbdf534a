"""Fixtures shared by the whole suite: real SQLite files and real PostgreSQL databases.

PostgreSQL is found from ``OBLIVIO_TEST_DATABASE_URL`` first, then from
testcontainers when a Docker daemon answers; otherwise PostgreSQL tests are
skipped, unless ``OBLIVIO_REQUIRE_POSTGRES=1`` (CI) turns every such skip into
a failure of the run.  Each test gets a database of its own, cloned from a
template database that is migrated once per session.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings

from eventstore import EventStore, KeyringFile, create_backend
from oblivio.bootstrap import upgrade_schema
from oblivio_bench.citus import CitusCluster, CitusUnavailableError, citus_cluster, pg_bindir

POSTGRES_URL_ENV = "OBLIVIO_TEST_DATABASE_URL"
REQUIRE_POSTGRES_ENV = "OBLIVIO_REQUIRE_POSTGRES"
REQUIRE_CITUS_ENV = "OBLIVIO_REQUIRE_CITUS"

# Per marker ("postgres", "citus"): the node ids that passed and were skipped.
_outcomes: dict[str, dict[str, list[str]]] = {
    marker: {"passed": [], "skipped": []} for marker in ("postgres", "citus")
}
_REQUIRE = {"postgres": REQUIRE_POSTGRES_ENV, "citus": REQUIRE_CITUS_ENV}
# Fewer shards than Citus's 32: each test database distributes every table,
# and two workers still each hold half of them.
CITUS_TEST_SHARDS = 4

# Hypothesis times each example (200 ms by default) and the generation of its
# data, on the wall clock: on a loaded shared machine a descheduled example
# fails as "too slow" or "flaky".  Speed is for the benchmarks to measure.
settings.register_profile("oblivio", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("oblivio")


def _require_postgres() -> bool:
    return os.environ.get(REQUIRE_POSTGRES_ENV) == "1"


def _no_postgres(reason: str) -> None:
    if _require_postgres():
        pytest.fail(f"{reason} and {REQUIRE_POSTGRES_ENV}=1", pytrace=False)
    pytest.skip(reason)


def _docker_postgres() -> Iterator[str] | None:
    try:
        import docker  # type: ignore[import-untyped]
        from testcontainers.postgres import PostgresContainer

        docker.from_env().ping()
    except Exception:  # no client library, no daemon: fall through to skip
        return None

    def run() -> Iterator[str]:
        with PostgresContainer("postgres:16", driver="psycopg") as pg:
            yield pg.get_connection_url()

    return run()


@pytest.fixture(scope="session")
def postgres_server_url() -> Iterator[str]:
    """A URL of a PostgreSQL server where tests may create databases."""
    url = os.environ.get(POSTGRES_URL_ENV)
    if url:
        yield url
        return
    container = _docker_postgres()
    if container is None:
        _no_postgres(f"no PostgreSQL: set {POSTGRES_URL_ENV} or start a Docker daemon")
        return
    yield from container


def _admin_engine(server_url: str) -> sa.Engine:
    from eventstore.backends.postgres import normalise_postgres_url

    return sa.create_engine(normalise_postgres_url(server_url), isolation_level="AUTOCOMMIT")


def database_url(server_url: str, name: str) -> str:
    return str(sa.engine.make_url(server_url).set(database=name).render_as_string(False))


@pytest.fixture(scope="session")
def postgres_template(postgres_server_url: str) -> Iterator[str]:
    """A migrated template database, created once per session."""
    name = f"oblivio_tpl_{uuid.uuid4().hex[:12]}"
    admin = _admin_engine(postgres_server_url)
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    backend = create_backend(database_url(postgres_server_url, name))
    upgrade_schema(backend.engine)
    backend.dispose()  # CREATE DATABASE … TEMPLATE needs the template unused
    yield name
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


@pytest.fixture
def postgres_url(postgres_server_url: str, postgres_template: str) -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for one test, dropped afterwards."""
    name = f"oblivio_t_{uuid.uuid4().hex[:12]}"
    admin = _admin_engine(postgres_server_url)
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"')
    yield database_url(postgres_server_url, name)
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A fresh, migrated SQLite database file."""
    url = f"sqlite:///{tmp_path / 'oblivio.sqlite3'}"
    backend = create_backend(url)
    upgrade_schema(backend.engine)
    backend.dispose()
    return url


def url_of_backend(request: pytest.FixtureRequest) -> str:
    """The fresh database of the backend ``request.param`` names (a fixture's body)."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
#: For a test module that overrides ``any_database_url`` to run on the Citus tier
#: too (``any_database_url = pytest.fixture(params=WITH_CITUS)(url_of_backend)``):
#: each Citus database costs seconds, so the tier takes the suites that matter.
WITH_CITUS = [*BACKENDS, pytest.param("citus", marks=pytest.mark.citus)]


@pytest.fixture(params=BACKENDS)
def any_database_url(request: pytest.FixtureRequest) -> str:
    """Each backend in turn: contract tests take this fixture."""
    return url_of_backend(request)


@pytest.fixture(scope="session")
def config_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("config")


@pytest.fixture(autouse=True)
def keyring_dir(config_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keyrings of every store a test opens go to a temporary directory, never to ~/.config.

    Both the setting (``OBLIVIO_KEYRING_DIR``, which subprocesses inherit) and
    ``XDG_CONFIG_HOME`` (for ``Settings`` built without the environment) point there.
    It is one directory for the session: stores have ids of their own, and a store
    shared by several tests (the docs' examples) must find its keyring in each.
    """
    keyrings = config_home / "oblivio" / "keyrings"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    monkeypatch.setenv("OBLIVIO_KEYRING_DIR", str(keyrings))
    return keyrings


@pytest.fixture
def keyring(tmp_path: Path) -> KeyringFile:
    return KeyringFile(tmp_path / "keyring.json")


@pytest.fixture
def store(any_database_url: str, keyring: KeyringFile) -> Iterator[EventStore]:
    event_store = EventStore(create_backend(any_database_url), keyring)
    yield event_store
    event_store.close()


@pytest.fixture(scope="session")
def citus() -> Iterator[CitusCluster]:
    """A coordinator and two workers started from the installed Citus extension.

    One cluster per test process (pytest-xdist worker), stopped and removed at
    the end of the session.  Without the extension the test is skipped, or
    fails with ``OBLIVIO_REQUIRE_CITUS=1`` (CI).  fsync is off: the cluster is
    thrown away with the session.
    """
    try:
        pg_bindir()  # raises when the extension is not installed
    except CitusUnavailableError as e:
        if os.environ.get(REQUIRE_CITUS_ENV) == "1":
            pytest.fail(f"{e} and {REQUIRE_CITUS_ENV}=1", pytrace=False)
        pytest.skip(str(e))
    with citus_cluster(workers=2, shard_count=CITUS_TEST_SHARDS, durable=False) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def citus_database(citus: CitusCluster) -> str:
    """A database on the test cluster, migrated (distributed layout), for the session.

    It is not dropped at the end: the cluster, stopped and removed with the session
    right after, takes it along (dropping it on three nodes first cost seconds).
    """
    name = f"oblivio_c_{uuid.uuid4().hex[:12]}"
    url = citus.create_database(name)
    backend = create_backend(url)
    upgrade_schema(backend.engine)
    backend.dispose()
    return url


@pytest.fixture
def citus_url(citus_database: str) -> str:
    """The session's Citus database, emptied: every table's rows gone, sequences restarted.

    Creating a database on three nodes and distributing its tables takes
    seconds; emptying one takes a fraction of that, and leaves the layout as
    ``oblivio db upgrade`` made it.  The distributed tables are emptied with
    DELETE: TRUNCATE gives each of their shards new files (every shard's table
    and indexes, on the workers), which made emptying the database take 0.31 s
    where this takes 0.22 s (medians of 8 paired rounds, a few rows written in
    between, on a loaded machine); the coordinator's tables are truncated.
    """
    with psycopg.connect(citus_database, autocommit=True) as conn, conn.transaction():
        # One connection per worker: the coordinator's tables have foreign keys.
        conn.execute("SET LOCAL citus.multi_shard_modify_mode TO 'sequential'")
        for (table,) in conn.execute(_CITUS_DISTRIBUTED).fetchall():
            conn.execute(f"DELETE FROM {table}".encode())
        local = [name for (name,) in conn.execute(_CITUS_LOCAL)]
        conn.execute(f"TRUNCATE {', '.join(local)} RESTART IDENTITY".encode())
        conn.execute(_RESTART_DISTRIBUTED_SEQUENCES)
    return citus_database


_CITUS_DISTRIBUTED = """
SELECT quote_ident(c.relname) FROM pg_dist_partition p JOIN pg_class c ON c.oid = p.logicalrelid
 WHERE p.partmethod = 'h'"""
_CITUS_LOCAL = """
SELECT quote_ident(c.relname) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> 'alembic_version'
   AND NOT EXISTS (SELECT FROM pg_dist_partition p
                    WHERE p.logicalrelid = c.oid AND p.partmethod = 'h')"""
# What TRUNCATE … RESTART IDENTITY did for the distributed tables' own sequences.
_RESTART_DISTRIBUTED_SEQUENCES = """
SELECT setval(d.objid::regclass, 1, false) FROM pg_depend d
  JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
  JOIN pg_dist_partition p ON p.logicalrelid = d.refobjid AND p.partmethod = 'h'
 WHERE d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')"""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture can skip the test.  Reports carry user_properties to
    # the controller under pytest-xdist; their ``keywords`` would not do, as
    # they also hold every parent node's name (a checkout named ``citus``).
    for marker in _outcomes:
        if item.get_closest_marker(marker) is not None:
            item.user_properties.append(("needs_backend", marker))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for marker, outcomes in _outcomes.items():
        if ("needs_backend", marker) not in report.user_properties:
            continue
        if report.skipped:
            outcomes["skipped"].append(report.nodeid)
        elif report.passed and report.when == "call":
            outcomes["passed"].append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # CI sets OBLIVIO_REQUIRE_POSTGRES=1 and OBLIVIO_REQUIRE_CITUS=1: a skipped
    # PostgreSQL or Citus test there means a backend that production runs on
    # went untested, so the run fails.  Under pytest-xdist (-n) the workers'
    # reports reach this process's pytest_runtest_logreport, so the controller
    # sees every skip.
    for marker, env in _REQUIRE.items():
        skipped = _outcomes[marker]["skipped"]
        if os.environ.get(env) == "1" and skipped:
            print(f"\n{len(skipped)} {marker} test(s) were skipped with {env}=1, e.g. {skipped[0]}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
