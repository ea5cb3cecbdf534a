"""The parts every memory operation works with, built once by the composition root."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from eventstore import EventStore
from projections.embedders import Embedder
from projections.graph import NodeGraphProjection
from projections.scoring import ScoringConfig
from projections.vectors import VectorProjection
from workers.projector import ProjectionRunner

DEFAULT_CONSISTENCY_TIMEOUT = 10.0


@dataclass
class MemoryContext:
    store: EventStore
    graph: NodeGraphProjection
    vectors: VectorProjection
    runner: ProjectionRunner
    embedder: Embedder
    scoring: ScoringConfig
    namespace: str
    clock: Callable[[], datetime]
    consistency_timeout: float = DEFAULT_CONSISTENCY_TIMEOUT
