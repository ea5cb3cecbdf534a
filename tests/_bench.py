"""Running ``oblivio bench …`` commands in tests, and what a PostgreSQL run must leave."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from eventstore.backends.postgres import normalise_postgres_url
from oblivio.cli import main
from oblivio_bench.citus import CitusUnavailableError, pg_bindir

RunBench = Callable[..., dict[str, Any]]  # (json_path, backend, *global_options) -> report


def invoke_bench(
    command: str, json_path: Path, options: Sequence[str], global_options: Sequence[str] = ()
) -> dict[str, Any]:
    """Run ``oblivio [global options] bench COMMAND [options] --json JSON_PATH``; it must
    succeed.  Its JSON document, with what it printed under ``"stdout"``."""
    result = CliRunner().invoke(
        main, [*global_options, "bench", command, *options, "--json", str(json_path)]
    )
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads(json_path.read_text())
    report["stdout"] = result.stdout
    return report


# How the benchmark names its scratch databases (oblivio_bench.scratch), as its
# CREATE DATABASE statement spells them, quoted or not.
_CREATED = re.compile(r'CREATE DATABASE "?(?P<name>oblivio_bench_[0-9a-f]{8}_[a-z]+)"?')


def bench_databases(server_url: str) -> set[str]:
    engine = sa.create_engine(normalise_postgres_url(server_url))
    try:
        with engine.connect() as conn:
            query = sa.text("SELECT datname FROM pg_database WHERE datname LIKE :pattern")
            return set(conn.execute(query, {"pattern": "oblivio_bench_%"}).scalars())
    finally:
        engine.dispose()


@contextmanager
def drops_its_databases(server_url: str) -> Iterator[None]:
    """Around a benchmark run on PostgreSQL in this process: the scratch databases it
    created are gone afterwards.  Only its own are looked for, as its statements name
    them: other runs on a shared server create and drop theirs at any time."""
    created: list[str] = []

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        if match := _CREATED.match(statement):
            created.append(match["name"])

    sa.event.listen(sa.Engine, "before_cursor_execute", record)
    try:
        yield
    finally:
        sa.event.remove(sa.Engine, "before_cursor_execute", record)
    assert created, "the run created no scratch database"
    assert not bench_databases(server_url) & set(created)


def assert_ran_on_postgres(report: dict[str, Any]) -> None:
    assert report["backend"] == "postgres"
    assert report["machine"]["postgres"]


def run_on_postgres(run_bench: RunBench, tmp_path: Path, server_url: str) -> dict[str, Any]:
    """``run_bench(json_path, "postgres", "--database-url", server_url)``, which must run on
    PostgreSQL and leave none of its scratch databases behind; its report."""
    with drops_its_databases(server_url):
        report = run_bench(tmp_path / "b.json", "postgres", "--database-url", server_url)
    assert_ran_on_postgres(report)
    return report


def require_citus() -> None:
    """Skip the test when the Citus extension is not installed (a failure with
    ``OBLIVIO_REQUIRE_CITUS=1``, as the tier's fixtures do): for a benchmark that starts
    its own cluster."""
    try:
        pg_bindir()
    except CitusUnavailableError as e:
        if os.environ.get("OBLIVIO_REQUIRE_CITUS") == "1":
            pytest.fail(f"{e} and OBLIVIO_REQUIRE_CITUS=1", pytrace=False)
        pytest.skip(str(e))


def run_on_citus(run_bench: RunBench, tmp_path: Path, server_url: str) -> dict[str, Any]:
    """``run_bench(json_path, "citus", "--database-url", server_url)``: a cluster of its
    own beside the server, whose scratch databases it must drop; its report."""
    require_citus()
    with drops_its_databases(server_url):
        report = run_bench(tmp_path / "b.json", "citus", "--database-url", server_url)
    assert report["backend"] == "citus"
    assert report["machine"]["postgres"]
    return report
