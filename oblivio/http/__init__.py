"""The HTTP API (FastAPI): ``create_app(context)`` builds it; ``oblivio serve`` runs it."""

from __future__ import annotations

from oblivio.http.app import create_app

__all__ = ["create_app"]
