"""oblivio: an event-sourced memory store for AI agents that can prove it forgot.

The public names below are imported on first use (PEP 562), not with the package:
``oblivio --help`` and the light commands must not pay for the database, the
embedders and the HTTP stack (see ``oblivio.cli``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oblivio.client import MemoryClient, MemoryEngine
    from oblivio.memory.records import EmbedderInfo, StoredItem
    from oblivio.remote import AsyncRemoteClient, RemoteClient
    from projections.model import (
        AssertionState,
        LifecycleState,
        Node,
        NodeType,
        Role,
        Scope,
        ScoredNode,
        SourceType,
    )
    from workers.erasure import ErasureStatus

__version__ = "0.1.0"

_LAZY = {
    "MemoryClient": "oblivio.client",
    "MemoryEngine": "oblivio.client",
    "EmbedderInfo": "oblivio.memory.records",
    "StoredItem": "oblivio.memory.records",
    "ErasureStatus": "workers.erasure",
    "RemoteClient": "oblivio.remote",
    "AsyncRemoteClient": "oblivio.remote",
    "AssertionState": "projections.model",
    "LifecycleState": "projections.model",
    "Node": "projections.model",
    "NodeType": "projections.model",
    "Role": "projections.model",
    "Scope": "projections.model",
    "ScoredNode": "projections.model",
    "SourceType": "projections.model",
}

__all__ = [
    "AssertionState",
    "AsyncRemoteClient",
    "EmbedderInfo",
    "ErasureStatus",
    "LifecycleState",
    "MemoryClient",
    "MemoryEngine",
    "Node",
    "NodeType",
    "RemoteClient",
    "Role",
    "Scope",
    "ScoredNode",
    "SourceType",
    "StoredItem",
    "__version__",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'oblivio' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once imported, found like any other attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
