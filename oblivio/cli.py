"""The ``oblivio`` command line.

Start-up time is part of the interface: ``oblivio --help`` and ``oblivio keys
list`` are meant to answer within half a second.  So the modules that define commands
import only ``click`` (and the standard library) at module level; everything a
command needs, down to the settings, is imported inside the command's function
(``python -X importtime -m oblivio.cli --help`` shows what is loaded).  New
commands and options follow the same rule; ``tests/test_cli_ops.py`` checks it.
"""

from __future__ import annotations

import atexit
import gc
import importlib.util
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from oblivio import __version__
from oblivio.cli_ops import COMMANDS
from oblivio.cli_support import EMBEDDER_HELP, embedder_name, friendly_errors, settings_from

#: Entry point group of commands other installed packages add to ``oblivio``
#: (the benchmarks register ``bench`` there): loaded only when asked for.
PLUGIN_GROUP = "oblivio.commands"

if TYPE_CHECKING:
    from importlib.metadata import EntryPoints

# At exit the interpreter runs the cyclic collector over every object still alive:
# for a command that is tens of thousands of objects (the modules, classes and
# tables it imported), whose memory goes back to the operating system anyway.
# Frozen (``gc.freeze``), they are skipped: those passes were a fifth of ``oblivio
# keys list``'s wall time.  Other exit handlers run as before; a cycle left at exit
# is not finalized, which Python never promised (the data model's ``__del__``).
atexit.register(gc.freeze)
# Start-up allocates mostly objects that live to the end (modules' functions,
# classes, SQLAlchemy tables): collecting them finds nothing.  At Python 3.11's young
# threshold of 700, ``oblivio keys list`` ran about 110 young passes, ten middle ones
# and then a full pass over everything it had imported (20-30 ms, a twentieth of its
# wall time).  At 2000 it stays far below the allocations that bring the first
# full pass.  The older generations keep their thresholds; long-running commands
# (serve, worker) collect their young generation a little less often.
gc.set_threshold(2000, *gc.get_threshold()[1:])


def entry_points(*, group: str, name: str | None = None) -> EntryPoints:
    """The installed plugins' entry points (importlib.metadata is imported on demand)."""
    from importlib.metadata import entry_points as installed

    found = installed(group=group)
    return found if name is None else found.select(name=name)


class PluginGroup(click.Group):
    """A group that also offers the commands registered under ``PLUGIN_GROUP``.

    A plugin is imported only when its command is run or listed, so the
    application never imports the packages that extend it.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        plugins = {point.name for point in entry_points(group=PLUGIN_GROUP)}
        return sorted(set(super().list_commands(ctx)) | plugins)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        for point in entry_points(group=PLUGIN_GROUP, name=cmd_name):
            try:
                loaded = point.load()
            except ModuleNotFoundError as missing:
                # An image built without the plugin's package (the Dockerfile
                # copies no benchmarks) still carries its entry point: no command.
                if missing.name is None or not f"{point.module}.".startswith(f"{missing.name}."):
                    raise  # the plugin is there but fails to import: say so
                return None
            if isinstance(loaded, click.Command):
                return loaded
        return None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, naming plugins without importing them.

        Click would load every command to print its one-line help; a plugin
        (the benchmarks) imports most of oblivio, which would cost ``--help``
        its start-up time.  A plugin is listed if its package can be found.
        """
        listed: list[tuple[str, click.Command | None]] = []
        for name in self.list_commands(ctx):
            command = self.commands.get(name)
            if command is not None and not command.hidden:
                listed.append((name, command))
            elif command is None and self._plugin_installed(name):
                listed.append((name, None))
        limit = formatter.width - 6 - max((len(name) for name, _ in listed), default=0)
        rows = [
            (name, f"Added by a plugin; see: oblivio {name} --help")
            if command is None
            else (name, command.get_short_help_str(limit))
            for name, command in listed
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    @staticmethod
    def _plugin_installed(name: str) -> bool:
        for point in entry_points(group=PLUGIN_GROUP, name=name):
            try:
                # find_spec of a top-level package locates it without running it.
                if importlib.util.find_spec(point.module.partition(".")[0]) is not None:
                    return True
            except (ImportError, ValueError):  # ValueError: blocked in sys.modules
                continue
        return False


@click.group(cls=PluginGroup)
@click.version_option(__version__, prog_name="oblivio")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Data directory of the embedded store (default ./oblivio-data).",
)
@click.option(
    "--database-url", default=None, help="PostgreSQL URL; overrides OBLIVIO_DATABASE_URL."
)
@click.option("--embedder", default=None, callback=embedder_name, help=EMBEDDER_HELP)
@click.pass_context
def main(
    ctx: click.Context, data_dir: Path | None, database_url: str | None, embedder: str | None
) -> None:
    """oblivio: a memory store for AI agents that can prove it forgot."""
    from pydantic import ValidationError

    from oblivio.settings import Settings

    try:
        ctx.obj = Settings.from_env(data_dir=data_dir, database_url=database_url, embedder=embedder)
    except ValidationError as e:  # an OBLIVIO_* variable: one line per refused setting
        lines = [f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors()]
        raise click.ClickException("invalid settings:\n  " + "\n  ".join(lines)) from e


@main.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
@click.pass_context
@friendly_errors
def db_upgrade(ctx: click.Context) -> None:
    """Apply schema migrations (servers; the embedded store migrates on open)."""
    from oblivio.bootstrap import database_url, migrate

    settings = settings_from(ctx)
    done = migrate(settings)
    click.echo(f"{done.describe()} ({_redacted(database_url(settings))})")


@main.command("verify-log")
@click.argument("export_file", required=False, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--jwks",
    "jwks_file",
    type=click.Path(exists=True, path_type=Path),
    help="Issuer JWKS for checking an audit export offline.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@friendly_errors
def verify_log(
    ctx: click.Context, export_file: Path | None, jwks_file: Path | None, as_json: bool
) -> None:
    """Check the log's integrity chain, or (given EXPORT_FILE) an audit export offline."""
    from oblivio.bootstrap import open_event_store

    if export_file is not None:
        _verify_export(export_file, jwks_file)
        return
    store = open_event_store(settings_from(ctx))
    try:
        report = store.verify()
    finally:
        store.close()
    brk = report.first_break
    if as_json:
        click.echo(
            json.dumps(
                {
                    "ok": report.ok,
                    "streams": report.streams_checked,
                    "events": report.events_checked,
                    "first_break": None
                    if brk is None
                    else {
                        "stream_id": brk.stream_id,
                        "version": brk.version,
                        "event_id": str(brk.event_id) if brk.event_id else None,
                        "reason": brk.reason,
                    },
                }
            )
        )
    elif brk is None:
        click.echo(f"ok: {report.streams_checked} streams, {report.events_checked} events verify")
    else:
        click.echo(f"BROKEN at stream {brk.stream_id} version {brk.version}: {brk.reason}")
    if not report.ok:
        sys.exit(1)


def _verify_export(export_file: Path, jwks_file: Path | None) -> None:
    from oblivio.memory.compliance import verify_audit_export

    if jwks_file is None:
        raise click.UsageError("checking an export offline needs --jwks")
    manifest = verify_audit_export(export_file.read_text(), json.loads(jwks_file.read_text()))
    of = manifest.get("namespace") or "every namespace"
    click.echo(
        f"ok: {manifest['count']} audit entries of {of}, signed manifest and hash chain "
        f"verify (chain head {manifest['chain_head'][:16]}…)"
    )


@main.command()
@click.pass_context
@friendly_errors
def demo(ctx: click.Context) -> None:
    """A guided tour: store, correct, reinforce, retrieve, forget, verify the certificate."""
    from oblivio.demo import run_demo

    run_demo(settings_from(ctx), click.echo)


def _redacted(url: str) -> str:
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://…@{rest.split('@', 1)[1]}"
    return url


# Commands are registered here, defined in oblivio.cli_ops.  Keep their modules'
# top-level imports to click: import what a command needs inside its function
# (see the module docstring), or every command pays for it at start-up.
for _command in COMMANDS:
    main.add_command(_command)


if __name__ == "__main__":
    main()
