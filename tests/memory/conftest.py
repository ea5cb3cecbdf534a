"""Fixtures of the memory-operation tests: clients of the facade on each backend.

``memory`` is a :class:`MemoryClient` on an empty store, once on SQLite and
once on PostgreSQL.  ``reopen`` opens another client on the same store, so a
test can close the first one and check what survived (durability, events that
replay).

On SQLite each test gets a database file of its own.  On PostgreSQL creating a
database per test costs most of a second, so the tests of one module share a
database and each test gets a namespace of its own in it: streams, nodes and
idempotency keys are all per namespace, which is exactly how tenants share a
server.  The tests sharing it also share its keyring, because the vector
runner applies every stream of a partition, whoever wrote it.  Tests that must
own the whole database (raw scans, concurrent runners, anything that may leave
an event the projections cannot apply) use ``fresh_memory`` or ``pg_settings``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from eventstore.backends.postgres import normalise_postgres_url
from oblivio import MemoryClient
from oblivio.settings import Settings
from tests._clients import Opener, client_opener

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def sqlite_settings(data_dir: Path) -> Settings:
    """The embedded default: a SQLite file in ``data_dir``."""
    return Settings(data_dir=data_dir, database_url=None)


def postgres_settings(
    data_dir: Path, url: str, keyring: Path | None = None, namespace: str = "default"
) -> Settings:
    return Settings(
        data_dir=data_dir,
        database_url=url,
        keyring_path=keyring or data_dir / "keyring.json",
        namespace=namespace,
    )


@pytest.fixture(scope="module")
def module_postgres(
    postgres_server_url: str, postgres_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """A migrated PostgreSQL database and its keyring, shared by one test module."""
    name = f"oblivio_m_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(
        normalise_postgres_url(postgres_server_url), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"')
    url = sa.engine.make_url(postgres_server_url).set(database=name).render_as_string(False)
    yield url, tmp_path_factory.mktemp("keyring") / "keyring.json"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


def settings_of_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """An empty store on the backend ``request.param`` names (a fixture's body).

    On the Citus tier, the session's distributed database emptied for the test.
    """
    if request.param == "sqlite":
        return sqlite_settings(tmp_path / "memory")
    if request.param == "citus":
        return postgres_settings(tmp_path, request.getfixturevalue("citus_url"))
    url, keyring = request.getfixturevalue("module_postgres")
    return postgres_settings(tmp_path, url, keyring, namespace=f"t-{uuid.uuid4().hex[:16]}")


@pytest.fixture(params=BACKENDS)
def memory_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """An empty store on each backend in turn (see the module docstring)."""
    return settings_of_backend(request, tmp_path)


@pytest.fixture(params=BACKENDS)
def fresh_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """A database of the test's own on each backend in turn."""
    if request.param == "sqlite":
        return sqlite_settings(tmp_path / "memory")
    return postgres_settings(tmp_path, request.getfixturevalue("postgres_url"))


@pytest.fixture
def pg_settings(tmp_path: Path, postgres_url: str) -> Settings:
    """A PostgreSQL database of the test's own."""
    return postgres_settings(tmp_path, postgres_url)


@pytest.fixture
def reopen(memory_settings: Settings) -> Iterator[Opener]:
    """Open (another) client on the test's store; all are closed at teardown."""
    yield from client_opener(memory_settings)


@pytest.fixture
def memory(reopen: Opener) -> MemoryClient:
    """A client on an empty store, on each backend in turn."""
    return reopen()


@pytest.fixture
def fresh_memory(fresh_settings: Settings) -> Iterator[MemoryClient]:
    """A client on a database of the test's own, on each backend in turn."""
    client = MemoryClient(settings=fresh_settings)
    yield client
    client.close()
