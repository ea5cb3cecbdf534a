"""Helpers shared by the CLI modules."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import click

from certificates import CertificatesError
from eventstore import OblivioError
from oblivio.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def friendly_errors(func: F) -> F:
    """Show user mistakes as one clear line instead of a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (OblivioError, CertificatesError) as e:
            raise click.ClickException(f"{type(e).__name__}: {e}") from e

    return wrapper  # type: ignore[return-value]


def settings_from(ctx: click.Context) -> Settings:
    settings: Settings = ctx.obj
    return settings
