"""Fixtures of the integration tests: a ``MemoryClient`` on each backend.

SQLite gets a data directory per test.  PostgreSQL gets one database per
module (creating one per test costs most of a second) and each test a
namespace of its own in it, sharing the module's keyring: every stream the
vector runner meets must be readable with it (see tests/memory/conftest.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from eventstore.postgres import normalise_postgres_url
from oblivio import MemoryClient
from oblivio.settings import Settings

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module")
def module_postgres(
    postgres_server_url: str, postgres_template: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    name = f"oblivio_i_{uuid.uuid4().hex[:12]}"
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


@pytest.fixture(params=BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if request.param == "sqlite":
        return Settings(data_dir=tmp_path / "memory")
    url, keyring = request.getfixturevalue("module_postgres")
    return Settings(
        data_dir=tmp_path / "memory",
        database_url=url,
        keyring_path=keyring,
        namespace=f"t-{uuid.uuid4().hex[:16]}",
    )


@pytest.fixture
def client(settings: Settings) -> Iterator[MemoryClient]:
    with MemoryClient(settings=settings) as opened:
        yield opened


class Clock:
    """A clock the test moves by hand (TTL expiry)."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> Clock:
    return Clock()
