"""The composition root: the one place that builds oblivio's parts from settings.

Entry points (CLI, HTTP, tests) call these functions; nothing else creates
engines or key providers, and nothing does so at import time.
"""

from __future__ import annotations

import os

from sqlalchemy.engine import Engine

import projections
from eventstore import EnvKeyProvider, EventStore, KeyProvider, KeyringFile, create_backend
from eventstore.migrate import upgrade
from eventstore.sqlite import sqlite_url
from oblivio.settings import Settings


def build_key_provider(settings: Settings) -> KeyProvider:
    """Keys from the environment when given there, else the keyring file."""
    if os.environ.get("OBLIVIO_KEKS"):
        return EnvKeyProvider.from_environ()
    return KeyringFile(settings.keyring_file)


def database_url(settings: Settings) -> str:
    return settings.database_url or sqlite_url(settings.data_dir)


def upgrade_schema(engine: Engine) -> None:
    """Bring every package's migration branch to its head."""
    upgrade(engine, [projections.MIGRATIONS], [projections.metadata])


def migrate(settings: Settings) -> None:
    """Bring the database schema up to date (``oblivio db upgrade``)."""
    backend = create_backend(database_url(settings))
    try:
        upgrade_schema(backend.engine)
    finally:
        backend.dispose()


def open_event_store(settings: Settings) -> EventStore:
    """Open the log; the embedded default migrates itself on open."""
    backend = create_backend(database_url(settings))
    if backend.embedded:
        upgrade_schema(backend.engine)
    return EventStore(
        backend, build_key_provider(settings), max_event_bytes=settings.max_event_bytes
    )
