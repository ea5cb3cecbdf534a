"""The ``oblivio`` command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

from eventstore import NewEvent, OblivioError
from oblivio import __version__
from oblivio.bootstrap import database_url, migrate, open_event_store
from oblivio.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(func: F) -> F:
    """Show user mistakes as one clear line instead of a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OblivioError as e:
            raise click.ClickException(f"{type(e).__name__}: {e}") from e

    return wrapper  # type: ignore[return-value]


def settings_from(ctx: click.Context) -> Settings:
    settings: Settings = ctx.obj
    return settings


@click.group()
@click.version_option(__version__, prog_name="oblivio")
@click.option("--data-dir", type=click.Path(path_type=Path), default=None,
              help="Data directory of the embedded store (default ./oblivio-data).")
@click.option("--database-url", default=None,
              help="PostgreSQL URL; overrides OBLIVIO_DATABASE_URL.")
@click.pass_context
def main(ctx: click.Context, data_dir: Path | None, database_url: str | None) -> None:
    """oblivio: a memory store for AI agents that can prove it forgot."""
    ctx.obj = Settings.from_env(data_dir=data_dir, database_url=database_url)


@main.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
@click.pass_context
@friendly_errors
def db_upgrade(ctx: click.Context) -> None:
    """Apply schema migrations (servers; the embedded store migrates on open)."""
    settings = settings_from(ctx)
    migrate(settings)
    click.echo(f"schema is up to date ({_redacted(database_url(settings))})")


@main.command("verify-log")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@friendly_errors
def verify_log(ctx: click.Context, as_json: bool) -> None:
    """Walk the integrity chain of the whole log and report the first break."""
    store = open_event_store(settings_from(ctx))
    try:
        report = store.verify()
    finally:
        store.close()
    brk = report.first_break
    if as_json:
        click.echo(json.dumps({
            "ok": report.ok, "streams": report.streams_checked, "events": report.events_checked,
            "first_break": None if brk is None else {
                "stream_id": brk.stream_id, "version": brk.version,
                "event_id": str(brk.event_id) if brk.event_id else None, "reason": brk.reason,
            },
        }))
    elif brk is None:
        click.echo(f"ok: {report.streams_checked} streams, {report.events_checked} events verify")
    else:
        click.echo(f"BROKEN at stream {brk.stream_id} version {brk.version}: {brk.reason}")
    if not report.ok:
        sys.exit(1)


@main.command()
@click.pass_context
@friendly_errors
def demo(ctx: click.Context) -> None:
    """A short guided tour of the log: write, read, erase, verify."""
    settings = settings_from(ctx)
    store = open_event_store(settings)
    try:
        _run_demo(store, settings)
    finally:
        store.close()


def _run_demo(store: Any, settings: Settings) -> None:
    ns = settings.namespace
    say = click.echo
    say(f"oblivio {__version__} — store at {_redacted(database_url(settings))}\n")
    user = "demo-user"
    written = store.append(ns, user, [
        NewEvent("memory.stored", {"content": "My current city is Boston."}),
        NewEvent("memory.stored", {"content": "I moved to Chicago."}),
    ])
    for e in written:
        say(f"  appended v{e.version} at position {e.position}: {e.data['content']}")
    say(f"  subject reference on disk: {store.subject_ref(ns, user)[:16]}… (keyed hash, no id)")
    say("\nErasing the first event (tombstone keeps its digest and chain hash)…")
    import uuid

    store.tombstone(ns, user, [written[0].event_id], uuid.uuid4())
    for e in store.read_stream(ns, user, from_version=written[0].version):
        shown = e.erasure.value if e.erasure else e.data["content"]
        say(f"  v{e.version}: {shown}")
    report = store.verify(ns, user)
    say(f"\nIntegrity chain: {'verifies' if report.ok else 'BROKEN'} "
        f"({report.events_checked} events)")


def _redacted(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://…@{rest.split('@', 1)[1]}"
    return url
