"""CLI commands for running and operating oblivio: serve, worker, keys, forget,
export, certificate verification.  Registered on ``oblivio.cli.main``.

Only ``click`` and the standard library are imported at module level; each
command imports what it uses (see ``oblivio.cli`` on start-up time).
"""

from __future__ import annotations

import copy
import json
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import click

from oblivio import json_text
from oblivio.cli_archive import archive
from oblivio.cli_dpo import dpo
from oblivio.cli_rebuild import rebuild
from oblivio.cli_support import embedder_option, emit, friendly_errors, settings_from

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from appdata.apikeys import KeyInfo
    from eventstore import EventStore
    from oblivio.http.server import HttpImplementation
    from oblivio.keyrings import KeyringEntry
    from oblivio.memory.context import MemoryContext
    from oblivio.settings import Settings

#: ``appdata.apikeys.PRINCIPALS``, spelled out so that building the command
#: line imports no database code (tests/test_cli_ops.py keeps the two equal).
PRINCIPALS = ("auditor", "operator", "user")
#: ``oblivio.http.server.HTTP_IMPLEMENTATIONS``, spelled out for the same reason.
HTTP_IMPLEMENTATIONS = ("auto", "httptools", "h11")


def _settings(ctx: click.Context) -> Settings:
    return settings_from(ctx)


def _open(ctx: click.Context) -> MemoryContext:
    from oblivio.bootstrap import open_memory

    return open_memory(_settings(ctx))


class _Store(NamedTuple):
    """What the key commands use: the log alone, not the projections, embedder or workers."""

    store: EventStore
    namespace: str
    clock: Callable[[], datetime]
    #: The host's own commands see every namespace (``oblivio.memory.api_keys.KeyHost``).
    cluster_wide: bool = True


def _open_store(ctx: click.Context) -> _Store:
    from eventstore.store import utc_now
    from oblivio.bootstrap import open_event_store

    settings = _settings(ctx)
    return _Store(open_event_store(settings), settings.namespace, utc_now)


_emit = emit


def _wait_for_signal() -> None:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()


# -- serve and worker ---------------------------------------------------------------


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=int)
@click.option(
    "--workers/--no-workers",
    "run_workers",
    default=True,
    show_default=True,
    help="Run projection and rebuild workers in this process.",
)
@click.option(
    "--http",
    "http_implementation",
    type=click.Choice(HTTP_IMPLEMENTATIONS),
    default="auto",
    show_default=True,
    help="uvicorn's HTTP/1.1 implementation (auto: httptools when installed); request "
    "heads are bounded by OBLIVIO_MAX_HEADER_BYTES under either.",
)
@embedder_option
@click.pass_context
@friendly_errors
def serve(
    ctx: click.Context, host: str, port: int, run_workers: bool, http_implementation: str
) -> None:
    """Run the HTTP API (plus in-process workers) on the configured store."""
    import uvicorn

    from oblivio.bootstrap import build_worker_service, open_memory
    from oblivio.http import create_app
    from oblivio.http.server import uvicorn_config

    settings = _settings(ctx)
    memory = open_memory(settings)
    _first_operator_key(memory)
    service = build_worker_service(memory, settings) if run_workers else None
    if service is not None:
        service.run()
    try:
        app = create_app(memory, settings)
        config = uvicorn_config(
            app,
            settings,
            http=cast("HttpImplementation", http_implementation),
            host=host,
            port=port,
            log_config=_log_config(),
        )
        uvicorn.Server(config).run()
    finally:
        if service is not None:
            service.stop()
            service.join()
        memory.access.close()  # writes the last retrieval counts
        memory.retrieval.save_images()  # the next process loads what this one built
        memory.store.close()


def _log_config() -> dict[str, Any]:
    """uvicorn's logging, plus oblivio's JSON access and worker lines at INFO."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["oblivio"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    config["loggers"]["workers"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    config["loggers"]["uvicorn.access"]["level"] = "WARNING"  # ours carries the request id
    # Access lines are JSON and nothing else, one per line, for log shippers;
    # uvicorn's formatter would also prefix the level and copy every record.
    config["formatters"]["json_lines"] = {"format": "%(message)s"}
    # Written by a thread of its own, not on the event loop: see log_writer.py.
    config["handlers"]["oblivio_access"] = {
        "formatter": "json_lines",
        "class": "oblivio.http.log_writer.LineWriterHandler",
        "stream": "ext://sys.stderr",
    }
    config["loggers"]["oblivio.access"] = {
        "handlers": ["oblivio_access"],
        "level": "INFO",
        "propagate": False,
    }
    return config


def _first_operator_key(memory: MemoryContext) -> None:
    """On a store without operator keys, create one and print it once."""
    from appdata import apikeys

    with memory.store.transaction() as tx:
        if apikeys.count_active(tx.connection, "operator", memory.clock()):
            return
        token = apikeys.issue(
            tx.connection, "operator", None, None, memory.clock(), namespace=memory.namespace
        )[1]
    click.echo("Created the first operator API key. It is shown only this once:", err=True)
    click.echo(f"  {token}", err=True)


@click.command()
@embedder_option
@click.pass_context
@friendly_errors
def worker(ctx: click.Context) -> None:
    """Run projection and rebuild workers plus the scheduler (several may run)."""
    from oblivio.bootstrap import build_worker_service, open_memory

    settings = _settings(ctx)
    memory = open_memory(settings)
    service = build_worker_service(memory, settings)
    service.run()
    click.echo("worker running; stop with Ctrl-C or SIGTERM", err=True)
    try:
        _wait_for_signal()
    finally:
        service.stop()
        service.join()
        memory.store.close()


# -- keys -------------------------------------------------------------------------------


@click.group()
def keys() -> None:
    """API keys, key-encryption keys and certificate keys."""


@keys.command("create")
@click.option("--principal", type=click.Choice(PRINCIPALS), required=True)
@click.option("--user-id", default=None, help="The user a 'user' key is bound to.")
@click.option(
    "--namespace",
    default=None,
    help="The namespace the key serves (default: OBLIVIO_NAMESPACE).",
)
@click.option(
    "--cluster-wide",
    is_flag=True,
    help="An operator key of no namespace: it serves every namespace (audit-logged).",
)
@click.pass_context
@friendly_errors
def keys_create(
    ctx: click.Context,
    principal: str,
    user_id: str | None,
    namespace: str | None,
    cluster_wide: bool,
) -> None:
    """Create an API key and print its token (shown once)."""
    from eventstore.ids import check_namespace
    from oblivio.memory.api_keys import create_api_key

    if cluster_wide and namespace is not None:
        raise click.UsageError("a key is either of --namespace or --cluster-wide, not both")
    memory = _open_store(ctx)
    if namespace is not None:
        memory = memory._replace(namespace=check_namespace(namespace))
    try:
        issued = create_api_key(
            memory, principal, user_id=user_id, actor_id="cli", cluster_wide=cluster_wide
        )
    finally:
        memory.store.close()
    click.echo(issued.token)


@keys.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def keys_list(ctx: click.Context, as_json: bool) -> None:
    """List API keys (ids, principals, pseudonymous subjects; never secrets)."""
    from appdata import apikeys

    memory = _open_store(ctx)
    try:
        with memory.store.reading() as view:
            found = apikeys.list_keys(view.connection, apikeys.ALL_NAMESPACES)
    finally:
        memory.store.close()
    none = "no API keys yet; create one with: oblivio keys create --principal operator"
    _print_listing(found, as_json, none, _key_line)


def _key_line(k: KeyInfo) -> str:
    state = f"revoked {k.revoked_at:%Y-%m-%d}" if k.revoked_at else "active"
    subject = f" subject {k.subject_ref[:12]}…" if k.subject_ref else ""
    namespace = k.namespace or "(cluster-wide)"
    return f"{k.key_id}  {k.principal:<8} {namespace}  {state}{subject}"


def _print_listing(
    found: Sequence[Any], as_json: bool, none: str, line: Callable[[Any], str]
) -> None:
    """``found`` as JSON, or one ``line`` each, or ``none`` when there is nothing."""
    if as_json:
        click.echo(json_text.dumps(found, indent=True))
    else:
        click.echo("\n".join(map(line, found)) if found else none)


@keys.command("revoke")
@click.argument("key_id")
@click.pass_context
@friendly_errors
def keys_revoke(ctx: click.Context, key_id: str) -> None:
    """Revoke an API key; returns once no running server accepts it any more."""
    from appdata import apikeys

    memory = _open_store(ctx)
    with memory.store.transaction() as tx:
        if not apikeys.revoke(tx.connection, key_id, memory.clock(), apikeys.ALL_NAMESPACES):
            raise click.ClickException(f"no active key {key_id}")
    # A server trusts a key it verified for up to OBLIVIO_API_KEY_CACHE_SECONDS
    # (capped), and this process cannot reach its cache.  Waiting out the cap,
    # whatever the servers are configured to, makes "revoked" mean revoked
    # everywhere when the command returns, e.g. after a key leaked.
    click.echo(f"waiting {apikeys.MAX_CACHE_SECONDS:g} s for servers' key caches…", err=True)
    time.sleep(apikeys.MAX_CACHE_SECONDS)
    click.echo(f"revoked {key_id}")


@keys.command("rotate-kek")
@click.pass_context
@friendly_errors
def keys_rotate_kek(ctx: click.Context) -> None:
    """Rotate the key-encryption key now and re-wrap every data key under it."""
    from eventstore import KeyringFile
    from oblivio.bootstrap import key_policy
    from workers.keys import rotate_keks

    memory = _open_store(ctx)
    keyring = memory.store.keys
    if not isinstance(keyring, KeyringFile):
        raise click.ClickException("keys come from the environment or a KMS; rotate them there")
    keyring.rotate(memory.clock())
    report = rotate_keks(memory.store, keyring, key_policy(_settings(ctx)), memory.clock)
    click.echo(
        f"active KEK version {keyring.active_kek_version}; "
        f"re-wrapped {report.rewrapped} data keys; retired {report.retired or 'none'}"
    )


@keys.command("keyrings")
@click.option("--orphaned", is_flag=True, help="Only keyrings whose store no longer exists.")
@click.option(
    "--prune-orphaned",
    is_flag=True,
    help="Delete the keyrings (and certificate keys) whose store no longer exists, after asking.",
)
@click.option("--dry-run", is_flag=True, help="With --prune-orphaned: list, delete nothing.")
@click.option("--yes", is_flag=True, help="With --prune-orphaned: do not ask.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly_errors
def keys_keyrings(
    ctx: click.Context,
    orphaned: bool,
    prune_orphaned: bool,
    dry_run: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """List the keyring files in the keyring directory and whether their stores still exist."""
    from oblivio.keyrings import list_keyrings

    if (dry_run or yes) and not prune_orphaned:
        raise click.UsageError("--dry-run and --yes go with --prune-orphaned")
    if as_json and prune_orphaned:
        raise click.UsageError("--json lists; --prune-orphaned deletes: give one of them")
    directory = _settings(ctx).keyring_directory
    orphaned = orphaned or prune_orphaned
    found = [k for k in list_keyrings(directory) if not orphaned or k.state == "orphaned"]
    none = f"no {'orphaned keyrings' if orphaned else 'keyrings'} in {directory}"
    _print_listing(found, as_json, none, _keyring_line)
    if prune_orphaned and found:
        _prune_keyrings(found, dry_run=dry_run, ask=not yes)


def _prune_keyrings(found: Sequence[KeyringEntry], *, dry_run: bool, ask: bool) -> None:
    """Delete the keyrings ``found`` orphaned whose store is still gone when it comes to it."""
    from oblivio.keyrings import prune_keyring

    if dry_run:
        click.echo(f"dry run: would delete {len(found)} keyring(s); nothing deleted")
        return
    if ask:
        click.confirm(
            f"Delete these {len(found)} keyring(s) and their certificate keys? Any copy of "
            "those stores' data becomes unreadable for good",
            abort=True,
        )
    for entry in found:
        pruned = prune_keyring(entry.path)
        click.echo(f"{'deleted' if pruned else 'kept (no longer orphaned)'} {entry.path}")


def _keyring_line(k: KeyringEntry) -> str:
    issuer = f", certificate keys {k.issuer_keys}" if k.issuer_keys else ""
    return f"{k.store_id}  {k.state:<8}  {k.detail}  ({k.path}{issuer})"


@keys.command("jwks")
@click.pass_context
@friendly_errors
def keys_jwks(ctx: click.Context) -> None:
    """Print the JWKS that verifies forget certificates and export manifests."""
    from oblivio.bootstrap import open_issuer_keyring

    memory = _open_store(ctx)
    try:
        jwks = open_issuer_keyring(_settings(ctx), memory.store.backend).jwks()
    finally:
        memory.store.close()
    click.echo(json.dumps(jwks, indent=2))


# -- erasure and exports ------------------------------------------------------------


@click.command()
@click.argument("user_id")
@click.option("--reason", default="user_request", show_default=True)
@click.option("--legal-ground", default="art17-1-b", show_default=True)
@click.option(
    "--wait",
    "wait_seconds",
    default=30.0,
    show_default=True,
    help="Seconds to wait for the certificate (0: do not wait).",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    default=None,
    help="Write the certificate (or status) here.",
)
@click.pass_context
@friendly_errors
def forget(
    ctx: click.Context,
    user_id: str,
    reason: str,
    legal_ground: str,
    wait_seconds: float,
    output: Path | None,
) -> None:
    """Erase everything of USER_ID and print the forget certificate."""
    from oblivio.memory import compliance

    memory = _open(ctx)
    with click.progressbar(length=1, label="erasing and rebuilding", file=sys.stderr) as bar:
        status = compliance.forget(
            memory,
            user_id,
            reason=reason,
            legal_ground=legal_ground,
            actor_id="cli",
            wait=wait_seconds > 0,
            timeout=wait_seconds,
        )
        bar.update(1)
    click.echo(
        f"request {status.request_id}: {status.status}, {status.events_erased} events erased",
        err=True,
    )
    if status.certificate is not None:
        claims = compliance.verify_certificate(memory, status.certificate)
        click.echo(claims["erasure"]["statement"], err=True)  # says so when no data was held
    _emit(status.certificate or vars(status), output)


@click.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--user-id",
    default=None,
    help="Store a subject export's memories for this user (default: its own).",
)
@click.option(
    "--chunk",
    type=click.IntRange(1, 1000),
    default=500,
    show_default=True,
    help="Memories per transaction.",
)
@click.pass_context
@friendly_errors
def import_memories(ctx: click.Context, file: Path, user_id: str | None, chunk: int) -> None:
    """Store the memories of FILE: JSON Lines (one memory a line, with its user_id) or a
    subject export.  Every line is checked before the first is stored."""
    from oblivio.memory import imports

    memory = _open(ctx)
    try:
        total = len(list(imports.read_memories(memory, file, user_id)))
        with click.progressbar(length=total, label="importing", file=sys.stderr) as bar:
            report = imports.import_file(
                memory, file, user_id=user_id, chunk=chunk, progress=bar.update
            )
    finally:
        memory.store.close()
    click.echo(
        f"imported {report.memories} memories of {report.users} users "
        f"in {report.chunks} transactions",
        err=True,
    )


@click.group()
def export() -> None:
    """Subject and audit exports, each with a signed manifest."""


@export.command("subject")
@click.argument("user_id")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None)
@click.pass_context
@friendly_errors
def export_subject(ctx: click.Context, user_id: str, output: Path | None) -> None:
    """Everything held about USER_ID (GDPR Art. 15/20) as JSON."""
    from oblivio.memory import compliance

    _emit(compliance.export_subject(_open(ctx), user_id=user_id), output)


@export.command("audit")
@click.option("--since", type=click.DateTime(), default=None)
@click.option("--until", type=click.DateTime(), default=None)
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None)
@click.pass_context
@friendly_errors
def export_audit(
    ctx: click.Context, since: datetime | None, until: datetime | None, output: Path | None
) -> None:
    """The audit stream as JSON Lines with a signed manifest as the last line."""
    from oblivio.memory import compliance

    memory = _open(ctx)
    _emit(compliance.export_audit(memory, since=_utc(since), until=_utc(until)), output)


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=value.tzinfo or UTC)


@click.command("verify-export")
@click.argument("export_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--jwks",
    "jwks_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The issuer's JWKS (oblivio keys jwks, or GET /v1/compliance/keys).",
)
@friendly_errors
def verify_export(export_file: Path, jwks_file: Path) -> None:
    """Verify a subject export (JSON) or an audit export (JSON Lines) offline against a JWKS."""
    from certificates import CertificateVerificationError

    text, keys = export_file.read_text(), json.loads(jwks_file.read_text())
    try:
        click.echo(_verified_export(text, keys))
    except CertificateVerificationError as e:
        raise click.ClickException(f"the export does NOT verify ({e.reason}): {e}") from e


def _verified_export(text: str, keys: dict[str, Any]) -> str:
    """What was verified, in one line; raises naming what failed."""
    from oblivio.memory import compliance

    try:
        document = json.loads(text)
    except ValueError:  # several lines: an audit export
        document = None
    if isinstance(document, dict) and document.get("format") == compliance.SUBJECT_EXPORT_FORMAT:
        manifest = compliance.verify_subject_export(document, keys)
        counts = manifest["counts"]
        return (
            f"ok: subject export of {manifest['subject_ref'][:12]}…, {counts['events']} events "
            f"and {counts['nodes']} nodes: signed manifest and content digests verify"
        )
    manifest = compliance.verify_audit_export(text, keys)
    of = manifest.get("namespace") or "every namespace"
    return (
        f"ok: {manifest['count']} audit entries of {of}, signed manifest and hash chain "
        f"verify (chain head {manifest['chain_head'][:16]}…)"
    )


@click.group()
def certificate() -> None:
    """Forget certificates."""


@certificate.command("verify")
@click.argument("certificate_file", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--jwks",
    "jwks_file",
    type=click.Path(exists=True, path_type=Path),
    required=True,
    help="The issuer's JWKS (oblivio keys jwks, or GET /v1/compliance/keys).",
)
def certificate_verify(certificate_file: Path, jwks_file: Path) -> None:
    """Verify a certificate offline against a JWKS; print its claims."""
    from certificates import CertificateVerificationError, verify

    try:
        verified = verify(certificate_file.read_text(), json.loads(jwks_file.read_text()))
    except CertificateVerificationError as e:
        raise click.ClickException(f"certificate does NOT verify ({e.reason}): {e}") from e
    payload = dict(verified.payload)
    click.echo(f"certificate verifies (kid {verified.kid})", err=True)
    click.echo(json.dumps(payload, indent=2))


@click.command()
@click.option(
    "--api-key",
    envvar="OBLIVIO_API_KEY",
    required=True,
    help="The key the server acts for (or OBLIVIO_API_KEY).",
)
@click.option(
    "--default-meta",
    "default_meta",
    default=None,
    metavar="JSON",
    help="Metadata every stored memory starts from, a JSON object such as "
    '\'{"channel": "mcp"}\'; a tool call\'s own meta wins on each key.',
)
@embedder_option
@click.pass_context
@friendly_errors
def mcp(ctx: click.Context, api_key: str, default_meta: str | None) -> None:
    """Serve memory tools to an agent over MCP (stdio)."""
    from appdata import apikeys
    from oblivio.bootstrap import open_memory
    from oblivio.mcp_server import build_mcp_server

    memory = open_memory(_settings(ctx), default_meta=_json_object(default_meta, "--default-meta"))
    with memory.store.reading() as view:
        who = apikeys.authenticate(view.connection, api_key, memory.clock())
    if who is None:
        raise click.ClickException("the API key is unknown, revoked or expired")
    build_mcp_server(memory, who).run("stdio")


def _json_object(text: str | None, option: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise click.BadParameter(f"not JSON: {e}", param_hint=option) from e
    if not isinstance(value, dict):
        raise click.BadParameter("must be a JSON object", param_hint=option)
    return value


COMMANDS = [
    serve,
    worker,
    keys,
    forget,
    import_memories,
    export,
    verify_export,
    certificate,
    mcp,
    rebuild,
    archive,
    dpo,
]
