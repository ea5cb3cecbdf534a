"""Fixtures of the projection contract tests: a client on each backend (tests/memory's)."""

from __future__ import annotations

from tests.memory.conftest import (  # noqa: F401 (fixtures)
    fresh_memory,
    fresh_settings,
    memory,
    memory_settings,
    module_postgres,
    reopen,
)
