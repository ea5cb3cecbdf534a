"""Fixtures of the erasure tests: clients of the facade on each backend.

Every test owns its database (a SQLite file, or a PostgreSQL database cloned
from the migrated template), because erasure tests look at whole tables, the
job queue, raw files and the audit stream, none of which is per namespace.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oblivio import MemoryClient
from oblivio.settings import Settings
from tests._clients import Opener, client_opener

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def make_settings(tmp_path: Path, database_url: str | None, **overrides: Any) -> Settings:
    """Settings of one test store: its data directory, database and keyring."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)  # see test_issuer_keys_need_no_existing_data_directory
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        keyring_path=tmp_path / "keyring.json",
        **overrides,
    )


def settings_of_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """A store of the test's own on the backend ``request.param`` names (a fixture's body)."""
    url = None if request.param == "sqlite" else request.getfixturevalue(f"{request.param}_url")
    return make_settings(tmp_path, url)


@pytest.fixture(params=BACKENDS)
def store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """A store of the test's own, on each backend in turn."""
    return settings_of_backend(request, tmp_path)


@pytest.fixture
def pg_store_settings(tmp_path: Path, postgres_url: str) -> Settings:
    """A PostgreSQL store of the test's own."""
    return make_settings(tmp_path, postgres_url)


@pytest.fixture
def open_client(store_settings: Settings) -> Iterator[Opener]:
    """Open a client (another one, or one with other settings) on the test's store."""
    yield from client_opener(store_settings)


@pytest.fixture
def client(open_client: Opener) -> MemoryClient:
    """A client on an empty store, on each backend in turn."""
    return open_client()


@pytest.fixture
def open_pg_client(pg_store_settings: Settings) -> Iterator[Opener]:
    yield from client_opener(pg_store_settings)
