"""Scratch databases for one benchmark run, removed when the run ends.

SQLite files go to a temporary directory.  On PostgreSQL each system gets a
database of its own (``oblivio_bench_<run>_<system>``), so neither sees the
other's tables, created on the server the URL names and dropped afterwards,
even when the run fails.  The log deliberately offers no way to create or drop
databases, so this module issues that administrative SQL itself, through an
engine the eventstore builds, and quotes every identifier it sends.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy.engine import Connection

from eventstore import create_backend
from oblivio_bench.systems import BenchError

_NAME = re.compile(r"oblivio_bench_[0-9a-f]{8}_[a-z]+")


def database_url(server_url: str, name: str) -> str:
    """``server_url`` with its database replaced by ``name``."""
    return urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))


@contextmanager
def _admin(server_url: str) -> Iterator[Connection]:
    backend = create_backend(server_url)
    try:
        with backend.translate_errors(), backend.engine.connect() as conn:
            yield conn.execution_options(isolation_level="AUTOCOMMIT")
    finally:
        backend.dispose()


def _execute(conn: Connection, statement: str, name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ValueError(f"refusing to touch a database not created by the benchmark: {name}")
    conn.exec_driver_sql(statement.format(conn.dialect.identifier_preparer.quote(name)))


@contextmanager
def postgres_databases(server_url: str, labels: Sequence[str]) -> Iterator[dict[str, str]]:
    """One fresh database per label, as ``{label: url}``; all dropped at exit."""
    run = secrets.token_hex(4)
    names = {label: f"oblivio_bench_{run}_{label}" for label in labels}
    created: list[str] = []
    try:
        with _admin(server_url) as conn:
            for name in names.values():
                _execute(conn, "CREATE DATABASE {}", name)
                created.append(name)
        yield {label: database_url(server_url, name) for label, name in names.items()}
    finally:
        with _admin(server_url) as conn:
            for name in created:
                _execute(conn, "DROP DATABASE IF EXISTS {} WITH (FORCE)", name)


def postgres_version(server_url: str) -> str:
    with _admin(server_url) as conn:
        return str(conn.exec_driver_sql("SHOW server_version").scalar_one())


@contextmanager
def citus_databases(labels: Sequence[str]) -> Iterator[dict[str, str]]:
    """One database per label on a Citus cluster started for the run (a coordinator and
    two workers on loopback, fsync on, as a server's default), as ``{label: url}``; the
    cluster and its files are removed at exit.  Their layout is made by migrating them."""
    from oblivio_bench.citus import CitusUnavailableError, citus_cluster, pg_bindir

    try:
        pg_bindir()
    except CitusUnavailableError as e:
        raise BenchError(f"--backend citus: {e}") from e
    with citus_cluster(workers=2) as cluster:
        yield {label: cluster.create_database(f"oblivio_bench_{label}") for label in labels}
