"""Settings, read once from the environment by the composition root."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    from projections.embedders import EmbedderOptions

# Every command line tool reads the settings, so this module imports neither the log
# nor the projections (``oblivio keys --help`` would pay for them); the two limits
# below are theirs, spelled out, and tests/test_cli_ops.py keeps them equal.
#: ``eventstore.DEFAULT_MAX_EVENT_BYTES``.
DEFAULT_MAX_EVENT_BYTES = 1024 * 1024
#: ``appdata.apikeys.MAX_CACHE_SECONDS``.
MAX_API_KEY_CACHE_SECONDS = 2.0

DEFAULT_DATA_DIR = Path("./oblivio-data")
KEYRINGS_SUBDIR = Path("oblivio") / "keyrings"
DEFAULT_NAMESPACE = "default"
#: A revoked key may authenticate for this long in a server that verified it
#: just before (the revocation comes from another process, the CLI).
DEFAULT_API_KEY_CACHE_SECONDS = 1.0
#: Request bodies beyond this answer 413 while being read: room for the largest
#: event (1 MiB encoded) in JSON's escaping, no more.
DEFAULT_MAX_REQUEST_BYTES = 4 * 1024 * 1024
#: A request line plus headers beyond this answer 431 (bearer keys and ids are small).
DEFAULT_MAX_HEADER_BYTES = 32 * 1024
#: Failed API key checks one client address may make per minute before 429s.
DEFAULT_AUTH_FAILURES_PER_MINUTE = 10


def check_embedder_name(name: str) -> str:
    """``name`` if it is an embedder name (``projections.embedders.EMBEDDER_KINDS``, the one
    rule); else a ``ValueError`` listing the names there are."""
    # Imported here, when there is a name to check: see the top of this module.
    from projections.embedders import check_embedder_name as check

    return check(name)


def _proxy_network(text: str) -> str:
    """``text`` as an address or network (``10.0.0.7``, ``172.18.0.0/16``, ``::1``)."""
    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        raise ValueError(
            f"{text[:80]!r} is not an IP address or network (such as 10.0.0.7 or 10.0.0.0/8)"
        ) from None


def default_keyring_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/oblivio/keyrings``, else ``~/.config/oblivio/keyrings``.

    The XDG base directory spec ignores a relative ``XDG_CONFIG_HOME``; so do we.
    """
    config_home = environ.get("XDG_CONFIG_HOME", "")
    base = Path(config_home) if os.path.isabs(config_home) else Path.home() / ".config"
    return base / KEYRINGS_SUBDIR


class Settings(BaseModel):
    """Where oblivio keeps its data and how it protects it.

    Environment variables: ``OBLIVIO_DATA_DIR``, ``OBLIVIO_DATABASE_URL``
    (PostgreSQL; when unset the embedded SQLite file in the data directory is
    used), ``OBLIVIO_KEYRING_DIR`` (where keyring files are kept, one per
    store named by the store's id; default ``$XDG_CONFIG_HOME/oblivio/keyrings``, else
    ``~/.config/oblivio/keyrings``: never inside the data directory), ``OBLIVIO_KEYRING``
    (one keyring file for this store, overriding the directory),
    ``OBLIVIO_KEKS`` and ``OBLIVIO_SUBJECT_HMAC_KEY`` (keys from the environment,
    for containers), ``OBLIVIO_ISSUER_KEYS`` (certificate signing keys as JSON) or
    ``OBLIVIO_ISSUER_KEYS_FILE``, ``OBLIVIO_MAX_EVENT_BYTES``, ``OBLIVIO_NAMESPACE``,
    ``OBLIVIO_ERASURE_DEADLINE_HOURS`` (default 72), ``OBLIVIO_RETENTION``
    (comma-separated ``namespace/scope=days`` policies), ``OBLIVIO_KEK_ROTATE_DAYS`` and
    ``OBLIVIO_KEK_RETIRE_DAYS`` (KEK rotation schedule, default 30 and 30),
    ``OBLIVIO_RETRIEVAL_CACHE_NODES`` (nodes kept decrypted in memory for retrieval,
    over all subjects; 0 turns the cache off), ``OBLIVIO_RETRIEVAL_CAPACITY`` (nodes per
    subject in the retrieval tier before the archiving job moves the lowest-retention
    ones out of default retrieval; 0, the default, turns archiving off),
    ``OBLIVIO_API_KEY_CACHE_SECONDS`` (how long
    a verified API key is trusted without reading it again, at most 2; 0 turns the cache
    off; see ``appdata.apikeys.VerifiedKeys`` for what that costs a revocation),
    ``OBLIVIO_EMBEDDER`` (the embedder by name, e.g. ``wordllama`` or ``hashing:384``;
    unset: the store's own, or ``wordllama`` for a new store; see docs/retrieval.md),
    ``OBLIVIO_ALLOW_MODEL_DOWNLOADS`` (sentence-transformers may download a model id),
    ``OBLIVIO_OPENAI_BASE_URL``, ``OBLIVIO_OPENAI_API_KEY``, ``OBLIVIO_EMBEDDING_BATCH_SIZE``,
    ``OBLIVIO_EMBEDDING_TIMEOUT_SECONDS`` and ``OBLIVIO_EMBEDDING_RETRIES`` (``openai:MODEL``
    embedders: the OpenAI-compatible endpoint and how it is called),
    ``OBLIVIO_MAX_REQUEST_BYTES`` (largest HTTP request body, default 4 MiB),
    ``OBLIVIO_MAX_HEADER_BYTES`` (largest request line plus headers, default 32 KiB),
    ``OBLIVIO_AUTH_FAILURES_PER_MINUTE`` (failed API key checks per client address and
    minute before 429, default 10; 0 turns the limit off),
    ``OBLIVIO_TRUSTED_PROXIES`` (comma-separated addresses or networks of reverse proxies
    whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed; default none),
    ``OBLIVIO_OVERDUE_WEBHOOK_URL`` and ``OBLIVIO_OVERDUE_WEBHOOK_SECRET`` (where to POST,
    signed with the secret, each erasure request that passes its deadline),
    ``OBLIVIO_CLAIM_EXTRACTOR`` (``rules``, the default, or ``openai-chat``) with
    ``OBLIVIO_CLAIM_EXTRACTOR_URL``, ``OBLIVIO_CLAIM_EXTRACTOR_MODEL`` and
    ``OBLIVIO_CLAIM_EXTRACTOR_API_KEY`` for the latter (docs/ingest.md).
    ``OBLIVIO_CONSOLE_IDLE_MINUTES`` (a console session ends after this long without a
    request, default 30).
    """

    # inf and NaN pass a bound such as ``gt=0`` (NaN compares false, inf is above
    # every bound from below) and break the schedules and limits built from them.
    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    data_dir: Path = DEFAULT_DATA_DIR
    database_url: str | None = None
    keyring_dir: Path | None = None
    keyring_path: Path | None = None
    max_event_bytes: int = Field(default=DEFAULT_MAX_EVENT_BYTES, gt=0)
    namespace: str = DEFAULT_NAMESPACE
    partitions: int = Field(default=8, ge=1, le=1024)
    issuer_keys_path: Path | None = None
    erasure_deadline_hours: float = Field(default=72.0, gt=0)
    #: Events a person's history grows by before a snapshot build is enqueued for it
    #: (workers.snapshots); 0: no background builds.
    snapshot_every: int = Field(default=1000, ge=0)
    kek_rotate_days: float = Field(default=30.0, gt=0)
    kek_retire_days: float = Field(default=30.0, ge=0)
    retention: tuple[str, ...] = ()  # "namespace/scope=days" entries
    # None: the retrieval index's own default (100,000).  Not imported here: the
    # index brings numpy, and every CLI command reads the settings.
    retrieval_cache_nodes: int | None = Field(default=None, ge=0)
    #: Subjects of at least this many nodes get an image of their retrieval index
    #: (projections.index_image), which a cold process loads in one read.
    retrieval_image_nodes: int = Field(default=5_000, ge=0)
    #: Per-subject capacity of the retrieval tier (workers.archiving); 0: archiving off.
    retrieval_capacity: int = Field(default=0, ge=0)
    api_key_cache_seconds: float = Field(
        default=DEFAULT_API_KEY_CACHE_SECONDS, ge=0, le=MAX_API_KEY_CACHE_SECONDS
    )
    #: The embedder's name; ``None``: the store's recorded one (the default for a new store).
    embedder: str | None = None
    #: sentence-transformers models may be downloaded (else local files only).
    allow_model_downloads: bool = False
    #: The OpenAI-compatible endpoint of ``openai:MODEL`` embedders; none: such names are
    #: refused, so memories never go to an endpoint the operator did not name.
    openai_base_url: str | None = Field(default=None, pattern=r"^https?://[^\s/?#]+")
    openai_api_key: str | None = Field(default=None, repr=False)
    embedding_batch_size: int = Field(default=64, ge=1, le=2048)
    embedding_timeout_seconds: float = Field(default=30.0, gt=0)
    embedding_retries: int = Field(default=5, ge=0, le=20)
    max_request_bytes: int = Field(default=DEFAULT_MAX_REQUEST_BYTES, ge=1024)
    max_header_bytes: int = Field(default=DEFAULT_MAX_HEADER_BYTES, ge=1024)
    auth_failures_per_minute: int = Field(default=DEFAULT_AUTH_FAILURES_PER_MINUTE, ge=0)
    #: Reverse proxies (addresses or CIDR networks) whose forwarded headers name the
    #: client; from anyone else those headers are ignored (``oblivio.http.server``).
    trusted_proxies: tuple[str, ...] = ()
    overdue_webhook_url: str | None = Field(default=None, pattern=r"^https?://")
    overdue_webhook_secret: str | None = Field(default=None, min_length=16)
    claim_extractor: Literal["rules", "openai-chat"] = "rules"
    claim_extractor_url: str | None = None
    claim_extractor_model: str | None = None
    console_idle_minutes: float = Field(default=30.0, gt=0, le=24 * 60)

    def embedder_options(self) -> EmbedderOptions:
        """What embedders built by name take from the settings."""
        from projections.embedders import EmbedderOptions, EndpointOptions

        endpoint = EndpointOptions(
            base_url=self.openai_base_url,
            api_key=self.openai_api_key,
            batch_size=self.embedding_batch_size,
            timeout=self.embedding_timeout_seconds,
            retries=self.embedding_retries,
        )
        return EmbedderOptions(allow_downloads=self.allow_model_downloads, endpoint=endpoint)

    @field_validator("namespace")
    @classmethod
    def _namespace_name(cls, name: str) -> str:
        # Checked here, where it is configured, not at the first write.  Imported
        # when a setting is checked: the log's package is not loaded with the settings.
        from eventstore.ids import check_namespace

        return check_namespace(name)

    @field_validator("embedder")
    @classmethod
    def _embedder_name(cls, name: str | None) -> str | None:
        return None if name is None else check_embedder_name(name)

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, proxies: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_proxy_network(p) for p in proxies)

    @model_validator(mode="after")
    def _webhook_is_signed(self) -> Settings:
        if self.overdue_webhook_url is not None and self.overdue_webhook_secret is None:
            raise ValueError("OBLIVIO_OVERDUE_WEBHOOK_URL needs OBLIVIO_OVERDUE_WEBHOOK_SECRET")
        return self

    def with_embedder(self, name: str | None) -> Settings:
        """These settings with another embedder, checked as ``OBLIVIO_EMBEDDER`` is."""
        return type(self).model_validate({**self.model_dump(), "embedder": name})

    @property
    def embedded(self) -> bool:
        return self.database_url is None

    @property
    def keyring_directory(self) -> Path:
        """Where this store's keyring file is looked for (see ``oblivio.keyrings``)."""
        return self.keyring_dir or default_keyring_dir(os.environ)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field, var in (
            ("data_dir", "OBLIVIO_DATA_DIR"),
            ("database_url", "OBLIVIO_DATABASE_URL"),
            ("keyring_dir", "OBLIVIO_KEYRING_DIR"),
            ("keyring_path", "OBLIVIO_KEYRING"),
            ("max_event_bytes", "OBLIVIO_MAX_EVENT_BYTES"),
            ("namespace", "OBLIVIO_NAMESPACE"),
            ("issuer_keys_path", "OBLIVIO_ISSUER_KEYS_FILE"),
            ("erasure_deadline_hours", "OBLIVIO_ERASURE_DEADLINE_HOURS"),
            ("snapshot_every", "OBLIVIO_SNAPSHOT_EVERY"),
            ("kek_rotate_days", "OBLIVIO_KEK_ROTATE_DAYS"),
            ("kek_retire_days", "OBLIVIO_KEK_RETIRE_DAYS"),
            ("retrieval_cache_nodes", "OBLIVIO_RETRIEVAL_CACHE_NODES"),
            ("retrieval_image_nodes", "OBLIVIO_RETRIEVAL_IMAGE_NODES"),
            ("retrieval_capacity", "OBLIVIO_RETRIEVAL_CAPACITY"),
            ("api_key_cache_seconds", "OBLIVIO_API_KEY_CACHE_SECONDS"),
            ("embedder", "OBLIVIO_EMBEDDER"),
            ("allow_model_downloads", "OBLIVIO_ALLOW_MODEL_DOWNLOADS"),
            ("openai_base_url", "OBLIVIO_OPENAI_BASE_URL"),
            ("openai_api_key", "OBLIVIO_OPENAI_API_KEY"),
            ("embedding_batch_size", "OBLIVIO_EMBEDDING_BATCH_SIZE"),
            ("embedding_timeout_seconds", "OBLIVIO_EMBEDDING_TIMEOUT_SECONDS"),
            ("embedding_retries", "OBLIVIO_EMBEDDING_RETRIES"),
            ("max_request_bytes", "OBLIVIO_MAX_REQUEST_BYTES"),
            ("max_header_bytes", "OBLIVIO_MAX_HEADER_BYTES"),
            ("auth_failures_per_minute", "OBLIVIO_AUTH_FAILURES_PER_MINUTE"),
            ("overdue_webhook_url", "OBLIVIO_OVERDUE_WEBHOOK_URL"),
            ("overdue_webhook_secret", "OBLIVIO_OVERDUE_WEBHOOK_SECRET"),
            ("claim_extractor", "OBLIVIO_CLAIM_EXTRACTOR"),
            ("claim_extractor_url", "OBLIVIO_CLAIM_EXTRACTOR_URL"),
            ("claim_extractor_model", "OBLIVIO_CLAIM_EXTRACTOR_MODEL"),
            ("console_idle_minutes", "OBLIVIO_CONSOLE_IDLE_MINUTES"),
        ):
            if env.get(var):
                values[field] = env[var]
        for field, var in (
            ("retention", "OBLIVIO_RETENTION"),
            ("trusted_proxies", "OBLIVIO_TRUSTED_PROXIES"),
        ):
            if env.get(var):
                values[field] = tuple(p.strip() for p in env[var].split(","))
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(values)
