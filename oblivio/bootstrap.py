"""The composition root: the one place that builds oblivio's parts from settings.

Entry points (CLI, HTTP, tests) call these functions; nothing else creates
engines or key providers, and nothing does so at import time.

Only what opening the log needs is imported with this module: the memory
operations' parts (projections, embedders, workers, certificates) are imported
by the functions that build them, so a command that needs only the log (``oblivio
keys list``) starts in a fraction of the time (see ``oblivio.cli``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from eventstore import (
    Backend,
    EnvKeyProvider,
    EventStore,
    KeyProvider,
    KeyringFile,
    create_backend,
)
from eventstore.backends.sqlite import sqlite_url
from eventstore.migrate import SchemaUpgrade, applied_revisions, lacks_migrations, upgrade
from eventstore.store import utc_now
from oblivio.keyrings import open_issuer_keys, open_keyring
from oblivio.settings import Settings

if TYPE_CHECKING:
    from pathlib import Path

    from sqlalchemy import MetaData
    from sqlalchemy.engine import Engine

    from certificates import IssuerKeyring
    from oblivio.memory.context import MemoryContext
    from projections.claims.plan import ClaimExtractor
    from projections.embedders import Embedder
    from projections.extraction import Extractor
    from projections.scoring import ScoringConfig
    from workers.policy import KeyPolicy
    from workers.service import WorkerService
    from workers.webhooks import Webhook


def build_key_provider(settings: Settings, backend: Backend) -> KeyProvider:
    """Keys from the environment when given there, else the store's keyring file."""
    if os.environ.get("OBLIVIO_KEKS"):
        return EnvKeyProvider.from_environ()
    return open_keyring(settings, backend)


def database_url(settings: Settings) -> str:
    return settings.database_url or sqlite_url(settings.data_dir)


def migration_locations() -> list[Path]:
    """The Alembic branches beside the log's own: the projections' and the
    application's tables' (``appdata``, whose first revision waits for the log's)."""
    import appdata
    import projections

    return [projections.MIGRATIONS, appdata.MIGRATIONS]


def table_metadatas() -> list[MetaData]:
    """The tables of the branches of ``migration_locations`` (imported on call)."""
    import projections
    from appdata.tables import metadata

    return [projections.metadata, metadata]


def upgrade_schema(engine: Engine) -> SchemaUpgrade:
    """Bring every package's migration branch to its head; what was done.

    Whether anything is pending is read from the scripts' revision ids; the
    tables (and Alembic) are imported only when something is.
    """
    applied = applied_revisions(engine)
    if not lacks_migrations(applied, migration_locations()):
        done = SchemaUpgrade(applied, applied)
    else:
        done = upgrade(engine, migration_locations(), table_metadatas())
    if engine.dialect.name == "postgresql":
        # On a Citus coordinator every table then gets its place on the cluster,
        # also when no migration was pending (a single-node store restored there).
        from eventstore.backends.citus import place_tables

        place_tables(engine)
    return done


def migrate(settings: Settings) -> SchemaUpgrade:
    """Bring the database schema up to date (``oblivio db upgrade``); what was done."""
    backend = create_backend(database_url(settings))
    try:
        return upgrade_schema(backend.engine)
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
    default_meta: Mapping[str, Any] | None = None,
) -> MemoryContext:
    """Everything the memory operations need, wired together.

    ``default_meta`` is checked like a call's ``meta`` (and copied) before anything opens.
    """
    from appdata.apikeys import VerifiedKeys
    from oblivio.memory import inputs
    from oblivio.memory.context import DEFAULT_CONSISTENCY_TIMEOUT, MemoryContext
    from projections.access import AccessLog
    from projections.graph import NodeGraphProjection
    from projections.index_image import IndexImages
    from projections.registry import ProjectionRegistry
    from projections.retrieval_index import RetrievalCache
    from projections.retrieval_service import RetrievalService
    from projections.scoring import ScoringConfig
    from projections.store_embedders import open_store_embedders
    from projections.vectors import VectorProjection
    from workers.archiving import Archiver
    from workers.certify import Certifier
    from workers.erasure import Eraser
    from workers.extraction import ExtractionWorker
    from workers.policy import ErasurePolicy
    from workers.projector import ProjectionRunner
    from workers.rebuild import RebuildWorker
    from workers.reembed import VectorRebuilder
    from workers.snapshots import SnapshotBuilder, SnapshotPolicy
    from workers.updates import NAME as LIKELY_UPDATES
    from workers.updates import LikelyUpdateWorker

    base_meta = inputs.meta(default_meta)
    store = open_event_store(settings)
    try:
        embedders = open_store_embedders(
            store,
            spec=settings.embedder,
            embedder=embedder,
            now=clock(),
            options=settings.embedder_options(),
        )
    except BaseException:
        store.close()
        raise
    graph = NodeGraphProjection(extractor)
    vectors = VectorProjection(embedders.first, extractor, embedders)
    runner = ProjectionRunner(store, vectors, partitions=settings.partitions, clock=clock)
    images = IndexImages(store, vectors.name, settings.retrieval_image_nodes)
    projections = ProjectionRegistry(
        [graph], [(vectors, settings.partitions)], [images], [LIKELY_UPDATES]
    )
    policy = ErasurePolicy(deadline=timedelta(hours=settings.erasure_deadline_hours))
    scoring = scoring or ScoringConfig()
    access = AccessLog(store)
    retrieval = RetrievalService(
        store,
        vectors.name,
        embedders,
        runner,
        access,
        RetrievalCache()
        if settings.retrieval_cache_nodes is None
        else RetrievalCache(settings.retrieval_cache_nodes),
        images,
    )
    issuer = open_issuer_keyring(settings, store.backend)
    certifier = Certifier(issuer, store.keys, key_policy(settings), clock)
    return MemoryContext(
        store=store,
        projections=projections,
        graph=graph,
        runner=runner,
        embedder=embedders.first,
        scoring=scoring,
        namespace=settings.namespace,
        clock=clock,
        eraser=Eraser(store, projections, policy, clock),
        rebuilder=RebuildWorker(store, projections, certifier, policy, clock),
        snapshots=SnapshotBuilder(
            store, projections, SnapshotPolicy(every=settings.snapshot_every), policy, clock
        ),
        reembedder=VectorRebuilder(store, embedders, runner, clock),
        certifier=certifier,
        issuer=issuer,
        extraction=ExtractionWorker(
            store,
            graph,
            claim_extractor or build_claim_extractor(settings),
            partitions=settings.partitions,
            clock=clock,
        ),
        updates=LikelyUpdateWorker(
            store,
            graph,
            retrieval,
            scoring,
            partitions=settings.partitions,
            catch_up_seconds=DEFAULT_CONSISTENCY_TIMEOUT,
            clock=clock,
        ),
        access=access,
        archiver=Archiver(store, graph, scoring, settings.retrieval_capacity, clock),
        retrieval=retrieval,
        api_keys=VerifiedKeys(settings.api_key_cache_seconds),
        default_meta=base_meta,
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
    from workers.policy import KeyPolicy

    return KeyPolicy(
        rotate_every=timedelta(days=settings.kek_rotate_days),
        retire_after=timedelta(days=settings.kek_retire_days),
    )


def open_issuer_keyring(settings: Settings, backend: Backend) -> IssuerKeyring:
    """Certificate signing keys: from ``OBLIVIO_ISSUER_KEYS`` (JSON), else the file kept
    with the store's keyring (``oblivio.keyrings``)."""
    from certificates import IssuerKeyring

    from_env = os.environ.get("OBLIVIO_ISSUER_KEYS")
    if from_env:
        return IssuerKeyring.from_env(from_env)
    return open_issuer_keys(settings, backend)


def open_event_store(settings: Settings) -> EventStore:
    """Open the log; the embedded default migrates itself on open."""
    backend = create_backend(database_url(settings))
    if backend.embedded:
        upgrade_schema(backend.engine)
    return EventStore(
        backend, build_key_provider(settings, backend), max_event_bytes=settings.max_event_bytes
    )


def overdue_webhook(settings: Settings) -> Webhook | None:
    """The endpoint told of erasure requests past their deadline, if one is configured."""
    from workers.webhooks import Webhook

    if settings.overdue_webhook_url is None:
        return None
    assert settings.overdue_webhook_secret is not None  # the settings require both
    return Webhook(settings.overdue_webhook_url, settings.overdue_webhook_secret)


def build_worker_service(ctx: MemoryContext, settings: Settings) -> WorkerService:
    """The asynchronous loops and periodic jobs for ``oblivio worker`` and ``oblivio serve``."""
    from workers.maintenance import RetentionPolicy
    from workers.scheduler import Maintenance
    from workers.service import WorkerService

    keys = ctx.store.keys
    maintenance = Maintenance(
        store=ctx.store,
        eraser=ctx.eraser,
        retention=[RetentionPolicy.parse(p) for p in settings.retention],
        keyring=keys if isinstance(keys, KeyringFile) else None,
        key_policy=key_policy(settings),
        clock=ctx.clock,
        overdue_webhook=overdue_webhook(settings),
        archiver=ctx.archiver,
        snapshots=ctx.snapshots,
    )
    return WorkerService(
        ctx.runner,
        ctx.rebuilder,
        maintenance,
        snapshots=ctx.snapshots,
        extraction=ctx.extraction,
        updates=ctx.updates,
        reembedder=ctx.reembedder,
    )
