"""oblivio: an event-sourced memory store for AI agents that can prove it forgot."""

from __future__ import annotations

__version__ = "0.1.0"
