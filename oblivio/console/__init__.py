"""The compliance console at ``/console``: server-rendered pages over the same
application operations the ``/v1`` API calls (see docs/console.md)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from oblivio.console import desk
from oblivio.console.pages import router
from oblivio.console.sessions import DEFAULT_IDLE_MINUTES
from oblivio.console.web import STATIC_DIR


def install(app: FastAPI, *, idle_minutes: float = DEFAULT_IDLE_MINUTES) -> None:
    """Serve the console (pages and its packaged static assets) from ``app``."""
    app.state.console_idle_minutes = idle_minutes
    app.include_router(router)
    app.include_router(desk.router)
    app.mount("/console/static", StaticFiles(directory=STATIC_DIR), name="console-static")


__all__ = ["install"]
