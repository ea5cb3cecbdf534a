"""Fixtures of the worker tests: a client on a database of its own, on each backend."""

from __future__ import annotations

from tests.memory.conftest import fresh_memory, fresh_settings, pg_settings  # noqa: F401 (fixtures)
