"""The composition root: the one place that builds oblivio's parts from settings.

Entry points (CLI, HTTP, tests) call these functions; nothing else creates
engines or key providers, and nothing does so at import time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

import projections
from certificates import IssuerKeyring
from eventstore import (
    Backend,
    EnvKeyProvider,
    EventStore,
    KeyProvider,
    KeyringFile,
    create_backend,
)
from eventstore.apikeys import VerifiedKeys
from eventstore.migrate import upgrade
from eventstore.sqlite import sqlite_url
from eventstore.store import utc_now
from oblivio.keyrings import open_keyring
from oblivio.memory.context import MemoryContext
from oblivio.settings import Settings
from projections.claims.plan import ClaimExtractor
from projections.embedders import Embedder, HashingEmbedder
from projections.extraction import Extractor
from projections.graph import NodeGraphProjection
from projections.retrieval_index import RetrievalCache
from projections.scoring import ScoringConfig
from projections.vectors import VectorProjection
from workers.certify import Certifier
from workers.erasure import AsyncPartitioning, Eraser
from workers.extraction import ExtractionWorker
from workers.maintenance import RetentionPolicy
from workers.policy import ErasurePolicy, KeyPolicy
from workers.projector import ProjectionRunner
from workers.rebuild import RebuildWorker
from workers.scheduler import Maintenance
from workers.service import WorkerService


def build_key_provider(settings: Settings, backend: Backend) -> KeyProvider:
    """Keys from the environment when given there, else the store's keyring file."""
    if os.environ.get("OBLIVIO_KEKS"):
        return EnvKeyProvider.from_environ()
    return open_keyring(settings, backend)


def database_url(settings: Settings) -> str:
    return settings.database_url or sqlite_url(settings.data_dir)


def upgrade_schema(engine: Engine) -> None:
    """Bring every package's migration branch to its head."""
    upgrade(engine, [projections.MIGRATIONS], [projections.metadata])


def migrate(settings: Settings) -> None:
    """Bring the database schema up to date (``oblivio db upgrade``)."""
    backend = create_backend(database_url(settings))
    try:
        upgrade_schema(backend.engine)
    finally:
        backend.dispose()


def open_memory(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    extractor: Extractor | None = None,
    scoring: ScoringConfig | None = None,
    claim_extractor: ClaimExtractor | None = None,
    clock: Callable[[], datetime] = utc_now,
) -> MemoryContext:
    """Everything the memory operations need, wired together."""
    store = open_event_store(settings)
    embedder = embedder or HashingEmbedder()
    graph = NodeGraphProjection(extractor)
    vectors = VectorProjection(embedder, extractor)
    runner = ProjectionRunner(store, vectors, partitions=settings.partitions, clock=clock)
    partitioning = [AsyncPartitioning(vectors.name, settings.partitions)]
    policy = ErasurePolicy(deadline=timedelta(hours=settings.erasure_deadline_hours))
    issuer = open_issuer_keyring(settings)
    certifier = Certifier(issuer, store.codec.keys, key_policy(settings), clock)
    return MemoryContext(
        store=store,
        graph=graph,
        vectors=vectors,
        runner=runner,
        embedder=embedder,
        scoring=scoring or ScoringConfig(),
        namespace=settings.namespace,
        clock=clock,
        eraser=Eraser(store, [graph, vectors], partitioning, policy, clock),
        rebuilder=RebuildWorker(store, [graph, vectors], partitioning, certifier, policy, clock),
        certifier=certifier,
        issuer=issuer,
        extraction=ExtractionWorker(
            store,
            graph,
            claim_extractor or build_claim_extractor(settings),
            partitions=settings.partitions,
            clock=clock,
        ),
        retrieval_cache=RetrievalCache(settings.retrieval_cache_nodes),
        api_keys=VerifiedKeys(settings.api_key_cache_seconds),
        console_idle_minutes=settings.console_idle_minutes,
    )


def build_claim_extractor(settings: Settings) -> ClaimExtractor:
    """The claim extractor named by ``OBLIVIO_CLAIM_EXTRACTOR`` (default: English rules)."""
    if settings.claim_extractor == "openai-chat":
        from projections.claims.chat import ChatClaimExtractor

        if not settings.claim_extractor_url or not settings.claim_extractor_model:
            raise ValueError(
                "the openai-chat claim extractor needs OBLIVIO_CLAIM_EXTRACTOR_URL and "
                "OBLIVIO_CLAIM_EXTRACTOR_MODEL"
            )
        return ChatClaimExtractor(
            settings.claim_extractor_url,
            settings.claim_extractor_model,
            api_key=os.environ.get("OBLIVIO_CLAIM_EXTRACTOR_API_KEY"),
        )
    from projections.claims.rules import RuleClaimExtractor

    return RuleClaimExtractor()


def key_policy(settings: Settings) -> KeyPolicy:
    return KeyPolicy(
        rotate_every=timedelta(days=settings.kek_rotate_days),
        retire_after=timedelta(days=settings.kek_retire_days),
    )


def open_issuer_keyring(settings: Settings) -> IssuerKeyring:
    """Certificate signing keys: from ``OBLIVIO_ISSUER_KEYS`` (JSON) or the keyring file."""
    from_env = os.environ.get("OBLIVIO_ISSUER_KEYS")
    if from_env:
        return IssuerKeyring.from_env(from_env)
    settings.issuer_keys_file.parent.mkdir(parents=True, exist_ok=True)
    return IssuerKeyring.open(settings.issuer_keys_file)


def open_event_store(settings: Settings) -> EventStore:
    """Open the log; the embedded default migrates itself on open."""
    backend = create_backend(database_url(settings))
    if backend.embedded:
        upgrade_schema(backend.engine)
    return EventStore(
        backend, build_key_provider(settings, backend), max_event_bytes=settings.max_event_bytes
    )


def build_worker_service(ctx: MemoryContext, settings: Settings) -> WorkerService:
    """The asynchronous loops and periodic jobs for ``oblivio worker`` and ``oblivio serve``."""
    keys = ctx.store.codec.keys
    maintenance = Maintenance(
        store=ctx.store,
        eraser=ctx.eraser,
        retention=[RetentionPolicy.parse(p) for p in settings.retention],
        keyring=keys if isinstance(keys, KeyringFile) else None,
        key_policy=key_policy(settings),
        clock=ctx.clock,
    )
    return WorkerService(ctx.runner, ctx.rebuilder, maintenance, extraction=ctx.extraction)
