"""Extraction: which nodes a stored event gives rise to.

Pluggable, but it must be deterministic: replaying the log must derive the
same nodes again.  The default derives exactly one node per event, holding
the event's content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from projections.model import NodeType


@dataclass(frozen=True)
class NodeDraft:
    content: str
    node_type: NodeType


class Extractor(Protocol):
    """Turns the content of one stored event into node drafts, deterministically."""

    def extract(self, content: str, node_type: NodeType) -> list[NodeDraft]: ...


class OneNodePerEvent:
    """The default: the event's content becomes one node of the requested type."""

    def extract(self, content: str, node_type: NodeType) -> list[NodeDraft]:
        return [NodeDraft(content, node_type)]
