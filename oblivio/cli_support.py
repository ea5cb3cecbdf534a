"""Helpers shared by the CLI modules.

Nothing heavy is imported here (see ``oblivio.cli`` on start-up time): the
error types are looked up only once an exception is on its way out.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from oblivio.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(func: F) -> F:
    """Show user mistakes as one clear line instead of a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as e:
            if _is_user_error(e):
                raise click.ClickException(f"{type(e).__name__}: {e}") from e
            raise

    return wrapper  # type: ignore[return-value]


def _is_user_error(error: Exception) -> bool:
    # Imported here: whatever raised one of these has imported its package already.
    from certificates import CertificatesError
    from eventstore import OblivioError

    return isinstance(error, OblivioError | CertificatesError)


def emit(value: Any, output: Path | None) -> None:
    """Print ``value`` (text as it is, anything else as indented JSON), or write it to
    ``output`` and say so."""
    from oblivio import json_text

    text = value if isinstance(value, str) else json_text.dumps(value, indent=True) + "\n"
    if output is None:
        click.echo(text, nl=False)
    else:
        output.write_text(text)
        click.echo(f"written to {output}", err=True)


def settings_from(ctx: click.Context) -> Settings:
    settings: Settings = ctx.obj
    return settings


EMBEDDER_HELP = (
    "Embedder by name: wordllama[:64|128|256], hashing[:DIM] (DIM 1 to 4096), "
    "sentence-transformers:PATH, openai:MODEL, minilm[:int8] (overrides OBLIVIO_EMBEDDER; "
    "default: the store's own)."
)


def embedder_name(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A ``--embedder`` value, refused as a usage error unless ``OBLIVIO_EMBEDDER``
    would take it (``oblivio.settings.check_embedder_name``)."""
    from oblivio.settings import check_embedder_name

    try:
        return None if value is None else check_embedder_name(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e


def embedder_option(func: F) -> F:
    """``--embedder NAME`` on a command (as on the ``oblivio`` group): overrides
    ``OBLIVIO_EMBEDDER`` for this command's store."""

    def override(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if embedder_name(ctx, param, value) is not None:
            ctx.obj = settings_from(ctx).with_embedder(value)

    option = click.option(
        "--embedder",
        default=None,
        expose_value=False,
        is_eager=True,
        callback=override,
        help=EMBEDDER_HELP,
    )
    return option(func)
