"""``oblivio dpo``: the data-protection officer's desk on the host's command line:
look a person up, act on their request with a reference, restrict processing,
hold erasure, and the request register.  The same operations as the console and
``/v1/dpo`` (``oblivio.memory.dpo``); the audit log records the actor ``cli``.

Only ``click`` and the standard library are imported at module level (see
``oblivio.cli`` on start-up time).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from oblivio.cli_support import emit, friendly_errors, settings_from

if TYPE_CHECKING:
    from oblivio.memory.context import MemoryContext

#: The vocabularies of ``eventstore.subject_rights``, spelled out so that building the
#: command line imports no database code (tests/test_cli_dpo.py keeps them equal).
RESTRICTION_GROUNDS = ("art18-1-a", "art18-1-b", "art18-1-c", "art18-1-d")
HOLD_GROUNDS = ("art17-3-b", "art17-3-e")
EXTENSION_REASONS = ("complexity", "number_of_requests")
REQUEST_KINDS = ("access", "erasure", "restriction")
REQUEST_STATUSES = ("completed", "failed", "open", "refused")
ACTOR = "cli"

reference_option = click.option(
    "--reference",
    required=True,
    help="The ticket or letter id this answers: [A-Za-z0-9_.:/-]{1,64}.",
)


def _run(ctx: click.Context, action: Callable[[MemoryContext], Any]) -> Any:
    from oblivio.bootstrap import open_memory

    memory = open_memory(settings_from(ctx))
    try:
        return action(memory)
    finally:
        memory.access.close()
        memory.store.close()


def _echo(value: Any, output: Path | None = None) -> None:
    emit(value, output)


@click.group()
def dpo() -> None:
    """The data-protection officer's desk: people, their requests, restrictions, holds."""


@dpo.command("lookup")
@click.argument("user_id")
@click.pass_context
@friendly_errors
def lookup(ctx: click.Context, user_id: str) -> None:
    """A person's requests of every kind, memory counts, restriction and hold (JSON)."""
    from oblivio.memory import dpo as desk

    _echo(_run(ctx, lambda m: desk.look_up(m, user_id)))


@dpo.command("export")
@click.argument("user_id")
@reference_option
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None)
@click.pass_context
@friendly_errors
def export(ctx: click.Context, user_id: str, reference: str, output: Path | None) -> None:
    """Serve USER_ID's access/portability request: the signed export, in the register."""
    from oblivio.memory import dpo as desk

    entry, exported = _run(
        ctx, lambda m: desk.export_for(m, user_id, reference=reference, actor_id=ACTOR)
    )
    click.echo(f"request {entry.request_id}: {entry.status}", err=True)
    _echo(exported, output)


@dpo.command("forget")
@click.argument("user_id")
@reference_option
@click.option("--legal-ground", default="art17-1-b", show_default=True)
@click.option("--wait", "wait_seconds", default=30.0, show_default=True)
@click.pass_context
@friendly_errors
def forget(
    ctx: click.Context, user_id: str, reference: str, legal_ground: str, wait_seconds: float
) -> None:
    """Erase USER_ID on their request (refused, and recorded, while a hold is in place)."""
    from oblivio.memory import dpo as desk

    status = _run(
        ctx,
        lambda m: desk.forget_for(
            m,
            user_id,
            reference=reference,
            actor_id=ACTOR,
            legal_ground=legal_ground,
            wait=wait_seconds > 0,
            timeout=wait_seconds,
        ),
    )
    click.echo(f"request {status.request_id}: {status.status}", err=True)
    _echo(status.certificate or vars(status))


def _person_command(
    name: str, operation: str, help: str, *, grounds: tuple[str, ...] = (), done: str = ""
) -> None:
    """Add ``oblivio dpo NAME USER_ID --reference R`` (with ``--ground`` from ``grounds``,
    if any): ``oblivio.memory.dpo.OPERATION`` for the person, as the console's desk
    runs it; prints its result, or ``done`` when it answers nothing."""

    def command(ctx: click.Context, user_id: str, reference: str, ground: str = "") -> None:
        from oblivio.memory import dpo as desk

        run = getattr(desk, operation)
        grounded = {"ground": ground} if grounds else {}
        result = _run(
            ctx, lambda m: run(m, user_id, reference=reference, actor_id=ACTOR, **grounded)
        )
        if done:
            click.echo(done, err=True)
        else:
            _echo(result)

    decorated = reference_option(click.pass_context(friendly_errors(command)))
    if grounds:
        decorated = click.option("--ground", type=click.Choice(grounds), required=True)(decorated)
    dpo.command(name, help=help)(click.argument("user_id")(decorated))


_person_command(
    "restrict",
    "restrict",
    "Restrict processing of USER_ID (GDPR Art. 18).",
    grounds=RESTRICTION_GROUNDS,
)
_person_command(
    "lift-restriction",
    "lift_restriction",
    "End USER_ID's restriction of processing.",
    done="restriction lifted",
)
_person_command(
    "hold",
    "place_hold",
    "Place a legal hold (GDPR Art. 17(3)) on USER_ID's data.",
    grounds=HOLD_GROUNDS,
)
_person_command(
    "lift-hold",
    "lift_hold",
    "Lift USER_ID's legal hold (refused erasures can then be run again).",
    done="hold lifted",
)


@dpo.command("register")
@click.option("--format", "fmt", type=click.Choice(("json", "csv")), default="json")
@click.option("--kind", type=click.Choice(REQUEST_KINDS), default=None)
@click.option("--status", type=click.Choice(REQUEST_STATUSES), default=None)
@click.option("--overdue", is_flag=True, help="Only requests past a deadline.")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None)
@click.pass_context
@friendly_errors
def register(
    ctx: click.Context,
    fmt: str,
    kind: str | None,
    status: str | None,
    overdue: bool,
    output: Path | None,
) -> None:
    """The register of data-subject requests, as JSON or CSV."""
    from oblivio.memory import dpo as desk

    text = _run(
        ctx,
        lambda m: desk.export_register(
            m, format=fmt, kind=kind, status=status, overdue_only=overdue
        ),
    )
    _echo(text if text.endswith("\n") else text + "\n", output)


@dpo.command("extend")
@click.argument("request_id")
@click.option("--reason", type=click.Choice(EXTENSION_REASONS), required=True)
@click.pass_context
@friendly_errors
def extend(ctx: click.Context, request_id: str, reason: str) -> None:
    """Extend REQUEST_ID's legal deadline by two further months (Art. 12(3))."""
    from oblivio.memory import dpo as desk

    _echo(_run(ctx, lambda m: desk.extend_deadline(m, request_id, reason=reason, actor_id=ACTOR)))
