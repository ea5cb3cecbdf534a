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

from oblivio import MemoryClient
from oblivio.settings import Settings
from tests.memory.conftest import module_postgres

__all__ = ["module_postgres"]  # a database per module, as the memory tests have it

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


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
