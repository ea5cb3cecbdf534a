"""oblivio: an event-sourced memory store for AI agents that can prove it forgot."""

from __future__ import annotations

from oblivio.client import MemoryClient, MemoryEngine
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

__version__ = "0.1.0"

__all__ = [
    "AssertionState",
    "LifecycleState",
    "MemoryClient",
    "MemoryEngine",
    "Node",
    "NodeType",
    "Role",
    "Scope",
    "ScoredNode",
    "SourceType",
    "__version__",
]
