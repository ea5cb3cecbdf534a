"""The parts every memory operation works with, built once by the composition root."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from appdata.apikeys import VerifiedKeys
from certificates import IssuerKeyring
from eventstore import EventStore
from eventstore.ids import check_namespace
from projections.access import AccessLog
from projections.embedders import Embedder
from projections.graph import NodeGraphProjection
from projections.registry import ProjectionRegistry
from projections.retrieval_index import RetrievalCache
from projections.retrieval_service import RetrievalService
from projections.scoring import ScoringConfig
from workers.archiving import Archiver
from workers.certify import Certifier
from workers.erasure import Eraser
from workers.extraction import ExtractionWorker
from workers.projector import ProjectionRunner
from workers.rebuild import RebuildWorker
from workers.reembed import VectorRebuilder
from workers.snapshots import SnapshotBuilder
from workers.updates import LikelyUpdateWorker

DEFAULT_CONSISTENCY_TIMEOUT = 10.0


@dataclass
class MemoryContext:
    store: EventStore
    #: Every projection: erasure, rebuilds, replay and digests iterate over it.
    projections: ProjectionRegistry
    #: The inline projection commands write in their own transaction (they need its
    #: node ids back); every other use of the projections goes through ``projections``.
    graph: NodeGraphProjection
    runner: ProjectionRunner
    embedder: Embedder
    scoring: ScoringConfig
    namespace: str
    clock: Callable[[], datetime]
    eraser: Eraser
    rebuilder: RebuildWorker
    #: Snapshot builds in the background, so a first certified delete replays a part.
    snapshots: SnapshotBuilder
    #: Re-embedding jobs (``oblivio rebuild vectors``): start, watch, work on them.
    reembedder: VectorRebuilder
    certifier: Certifier
    issuer: IssuerKeyring
    extraction: ExtractionWorker
    #: Likely-update detection (projections.updates), after commit.
    updates: LikelyUpdateWorker
    #: Retrieval's access counts not yet written (Semvec's access frequency).
    access: AccessLog
    #: Selective forgetting: archives what exceeds the retrieval tier's capacity.
    archiver: Archiver
    #: The projections' read facade for retrieval and the vector state.
    retrieval: RetrievalService
    #: Verified API keys of the HTTP API; off unless the settings give a time.
    api_keys: VerifiedKeys = field(default_factory=lambda: VerifiedKeys(0))
    #: Metadata every ``store`` starts from, under the call's own ``meta``
    #: (``{**default_meta, **meta}``); validated and copied when the client is built.
    default_meta: Mapping[str, Any] = field(default_factory=dict)
    #: How long a console session may stay idle before it must sign in again.
    console_idle_minutes: float = 30.0
    #: Whether listings (API keys, the audit trail, metrics, the console) span every
    #: namespace: true for the host's own contexts (embedded client, CLI, which hold
    #: the database and its keys anyway) and for cluster-wide API keys; false for
    #: a namespaced key's requests.  Reads by id always stay in ``namespace``.
    cluster_wide: bool = True

    def for_key(self, key_namespace: str | None) -> MemoryContext:
        """The tenant an API key of ``key_namespace`` is served in: its namespace, or
        for a cluster-wide key (``None``) this context's namespace, seeing all."""
        if key_namespace is None:
            return self.tenant(self.namespace, cluster_wide=True)
        return self.tenant(key_namespace, cluster_wide=False)

    def tenant(self, namespace: str, *, cluster_wide: bool) -> MemoryContext:
        """This context serving ``namespace``: the same parts (store, projections,
        workers, caches), another tenant.  A shallow copy, made per request (a few
        microseconds), so it always holds the parts this context holds now."""
        wanted = check_namespace(namespace)
        if wanted == self.namespace and cluster_wide == self.cluster_wide:
            return self
        return replace(self, namespace=wanted, cluster_wide=cluster_wide)

    @property
    def consistency_timeout(self) -> float:
        """Seconds a consistent read (and ``wait_for_extraction``) waits for the
        followers to pass the caller's last write before ``NotCaughtUpError``.

        Kept by the likely-update detector, which waits for the vector state as
        long within a consistent read's wait (and in its own worker loop): one
        setting for every context sharing it (tenants, per-user handles)."""
        return self.updates.catch_up_seconds

    @consistency_timeout.setter
    def consistency_timeout(self, seconds: float) -> None:
        self.updates.catch_up_seconds = seconds

    @property
    def retrieval_cache(self) -> RetrievalCache:
        """The per-subject retrieval indexes this process keeps (the retrieval service's)."""
        return self.retrieval.cache
