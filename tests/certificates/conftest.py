"""Shared fixtures for the certificates tests."""

from __future__ import annotations

from typing import Any

import pytest

from certificates import IssuerKeyring


@pytest.fixture
def keyring() -> IssuerKeyring:
    return IssuerKeyring.generate()


@pytest.fixture
def certificate_payload() -> dict[str, Any]:
    """A payload shaped like a forget certificate (DESIGN.md §6), with awkward values."""
    return {
        "certificate_id": "0c5b7f62-94a3-4d1e-9d8c-2f0e8b3c6a11",
        "issued_at": "2025-01-31T12:00:00Z",
        "request": {"id": "req-7", "legal_ground": "GDPR Art. 17(1)(b)", "reason": "Widerruf €"},
        "subject_ref": "hmac-sha256:9f2c",
        "namespace": "agents/😀",
        "events_erased": 3,
        "stream_versions": [1, 3],
        "merkle_root": "3q2-7w",
        "projections": [
            {"name": "node_graph", "version": 2, "position": 41, "equal": True},
            {"name": "vector_state", "version": 1, "position": 41, "equal": True},
        ],
        "score": 0.30000000000000004,
        "residual_copies": None,
        "limits": "Backups older than the KEK retirement date are out of scope.\n",
    }
