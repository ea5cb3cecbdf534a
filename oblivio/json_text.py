"""Values as JSON, the one way every surface writes them: HTTP, the CLI and MCP.

A time is ISO 8601 in UTC with ``Z`` (``2026-12-05T21:49:25.444556Z``), as the HTTP
API's pydantic models write it; a UUID is its string; a dataclass an object of its
fields.  orjson writes all of them natively with ``OPTIONS``, which the HTTP
encoder (``oblivio.http.encoding``) uses too; anything else (a path) is written as
its ``str``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

#: pydantic writes an aware UTC datetime with ``Z``; orjson does with this option.
OPTIONS = orjson.OPT_UTC_Z


def dumps(value: Any, *, indent: bool = False) -> str:
    """``value`` as JSON text (indented by two spaces if ``indent``)."""
    option = OPTIONS | orjson.OPT_INDENT_2 if indent else OPTIONS
    return orjson.dumps(value, default=str, option=option).decode()


def plain(value: Any) -> Any:
    """``value`` as the lists, dicts, strings and numbers ``dumps`` writes."""
    return orjson.loads(orjson.dumps(value, default=str, option=OPTIONS))


def iso(value: datetime) -> str:
    """One time as ``dumps`` writes it."""
    text: str = orjson.loads(orjson.dumps(value, option=OPTIONS))
    return text
