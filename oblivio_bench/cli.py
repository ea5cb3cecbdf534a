"""``oblivio bench …``: the benchmark commands, a plugin of the ``oblivio`` command line.

The application does not import this package.  ``pyproject.toml`` registers
the ``bench`` group under the ``oblivio.commands`` entry point group, and
``oblivio.cli`` loads a command from there only when it is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from oblivio.cli_support import F, friendly_errors, settings_from
from oblivio_bench.erasure import ErasureBenchConfig, run_erasure_bench
from oblivio_bench.eventstore import DEFAULT_SERVER_URL, BenchConfig, run_eventstore_bench
from oblivio_bench.figures import FigureReport
from oblivio_bench.memory import SECTIONS as MEMORY_SECTIONS
from oblivio_bench.memory import MemoryBenchConfig, run_memory_bench
from projections.scoring import ScoringConfig


def bench_options(*, rounds_help: str, scale_help: str) -> Callable[[F], F]:
    """The options every benchmark command shares: backend, JSON output, rounds, scale."""

    def decorate(command: F) -> F:
        for option in reversed(
            [
                click.option(
                    "--backend",
                    type=click.Choice(["sqlite", "postgres"]),
                    default="sqlite",
                    show_default=True,
                    help="SQLite in a temporary directory, or scratch databases on the "
                    "PostgreSQL server of --database-url / OBLIVIO_DATABASE_URL "
                    f"(default {DEFAULT_SERVER_URL}).",
                ),
                click.option(
                    "--json",
                    "json_path",
                    type=click.Path(dir_okay=False, path_type=Path),
                    default=None,
                    help="Also write every figure and the machine info to this file.",
                ),
                click.option(
                    "--rounds",
                    type=click.IntRange(min=1),
                    default=5,
                    show_default=True,
                    help=rounds_help,
                ),
                click.option(
                    "--scale",
                    type=click.FloatRange(min=0, min_open=True),
                    default=1.0,
                    show_default=True,
                    help=scale_help,
                ),
            ]
        ):
            command = option(command)
        return command

    return decorate


@click.group()
def bench() -> None:
    """Benchmarks (see docs/benchmarks.md)."""


@bench.command("eventstore")
@bench_options(
    rounds_help="Rounds per workload (heavy workloads run half as many).",
    scale_help="Multiply every event count (e.g. 0.05 for a smoke run).",
)
@click.option(
    "--compare",
    type=click.Choice(["eventsourcing"]),
    default=None,
    help="Run the same workloads with this library in the same run, and print ratios.",
)
@click.option(
    "--gc/--no-gc",
    "gc_in_rounds",
    default=True,
    show_default=True,
    help="Let Python's garbage collector run while rounds are timed; --no-gc pauses it "
    "then (collecting between rounds), to time CPU work without allocation pressure.",
)
@click.pass_context
@friendly_errors
def bench_eventstore(
    ctx: click.Context,
    backend: str,
    compare: str | None,
    gc_in_rounds: bool,
    json_path: Path | None,
    rounds: int,
    scale: float,
) -> None:
    """Time the log's appends and reads and print medians (progress goes to stderr)."""
    server_url = settings_from(ctx).database_url or DEFAULT_SERVER_URL
    config = BenchConfig(
        backend=backend,
        compare=compare,
        rounds=rounds,
        scale=scale,
        server_url=server_url,
        gc_in_rounds=gc_in_rounds,
    )
    report = run_eventstore_bench(config, progress=lambda line: click.echo(line, err=True))
    click.echo(report.table())
    if json_path is not None:
        report.write_json(json_path)
        click.echo(f"\nfigures written to {json_path}", err=True)


@bench.command("http")
@bench_options(
    rounds_help="Rounds per figure.",
    scale_help="Multiply every request count (e.g. 0.05 for a smoke run).",
)
@click.pass_context
@friendly_errors
def bench_http(
    ctx: click.Context, backend: str, json_path: Path | None, rounds: int, scale: float
) -> None:
    """Store and retrieve over HTTP and through the facade with 1, 8 and 32 clients."""
    from oblivio_bench.http import HttpBenchConfig, run_http_bench  # starts servers: lazily

    server_url = settings_from(ctx).database_url or DEFAULT_SERVER_URL
    config = HttpBenchConfig(backend=backend, rounds=rounds, scale=scale, server_url=server_url)
    report = run_http_bench(config, progress=lambda line: click.echo(line, err=True))
    click.echo(report.table())
    if json_path is not None:
        report.write_json(json_path)
        click.echo(f"\nfigures written to {json_path}", err=True)


def _emit_figures(report: FigureReport, json_path: Path | None) -> None:
    click.echo(report.table())
    if json_path is not None:
        report.write_json(json_path)
        click.echo(f"\nfigures written to {json_path}", err=True)


@bench.command("memory")
@bench_options(
    rounds_help="Rounds of the store(), catch-up and ingest figures.",
    scale_help="Multiply every count, retrieval sizes included (e.g. 0.01 for a smoke run).",
)
@click.option(
    "--section",
    "sections",
    type=click.Choice(MEMORY_SECTIONS),
    multiple=True,
    help="Run only this measurement (repeatable); default: all of them.",
)
@click.pass_context
@friendly_errors
def bench_memory(
    ctx: click.Context,
    backend: str,
    json_path: Path | None,
    rounds: int,
    scale: float,
    sections: tuple[str, ...],
) -> None:
    """Time store() beside a bare append, vector catch-up, and retrieval at 1k-100k nodes."""
    server_url = settings_from(ctx).database_url or DEFAULT_SERVER_URL
    config = MemoryBenchConfig(
        backend=backend,
        rounds=rounds,
        scale=scale,
        server_url=server_url,
        sections=sections or MEMORY_SECTIONS,
    )
    report = run_memory_bench(config, progress=lambda line: click.echo(line, err=True))
    _emit_figures(report, json_path)


@bench.command("recall")
@click.option(
    "--dataset",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    required=True,
    help="A directory of LoCoMo-format conversations (*.json).",
)
@click.option(
    "--embedder",
    default="wordllama",
    show_default=True,
    help="The embedder to measure, by name (wordllama[:DIM], hashing[:DIM], ...).",
)
@click.option(
    "--lexical-weight",
    type=float,
    default=None,
    help="ScoringConfig.lexical_weight to measure (default: the default ranking's).",
)
@click.option(
    "--session-context-weight",
    type=float,
    default=None,
    help="ScoringConfig.session_context_weight to measure (default: the default ranking's).",
)
@click.option(
    "--backend",
    type=click.Choice(["sqlite", "postgres"]),
    default="sqlite",
    show_default=True,
    help="SQLite in a temporary directory, or a scratch database on --database-url.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write every figure and the machine info to this file.",
)
@click.pass_context
@friendly_errors
def bench_recall(
    ctx: click.Context,
    dataset: Path,
    embedder: str,
    lexical_weight: float | None,
    session_context_weight: float | None,
    backend: str,
    json_path: Path | None,
) -> None:
    """Recall@1/5/10 of retrieve() on LoCoMo, beside plain BM25 and plain cosine."""
    from oblivio_bench.recall import RecallBenchConfig, run_recall_bench  # needs bm25s: lazily

    weights = {
        name: value
        for name, value in (
            ("lexical_weight", lexical_weight),
            ("session_context_weight", session_context_weight),
        )
        if value is not None
    }
    config = RecallBenchConfig(
        dataset=dataset,
        embedder=embedder,
        backend=backend,
        server_url=settings_from(ctx).database_url or DEFAULT_SERVER_URL,
        scoring=ScoringConfig(**weights) if weights else None,
    )
    report = run_recall_bench(config, progress=lambda line: click.echo(line, err=True))
    _emit_figures(report, json_path)


@bench.command("erasure")
@bench_options(
    rounds_help="Subjects forgotten (and timed) per phase.",
    scale_help="Multiply the background of both phases (10,000 and 500,000 events).",
)
@click.option(
    "--subject-events",
    type=click.IntRange(min=2),
    default=1000,
    show_default=True,
    help="Events of each subject that is forgotten or has events deleted.",
)
@click.pass_context
@friendly_errors
def bench_erasure(
    ctx: click.Context,
    backend: str,
    json_path: Path | None,
    rounds: int,
    scale: float,
    subject_events: int,
) -> None:
    """Time forget to a verified certificate, and delete_event, as the store grows."""
    server_url = settings_from(ctx).database_url or DEFAULT_SERVER_URL
    config = ErasureBenchConfig(
        backend=backend,
        rounds=rounds,
        scale=scale,
        subject_events=subject_events,
        server_url=server_url,
    )
    report = run_erasure_bench(config, progress=lambda line: click.echo(line, err=True))
    _emit_figures(report, json_path)


@bench.command("startup")
@click.option(
    "--rounds",
    type=click.IntRange(min=1),
    default=11,
    show_default=True,
    help="Rounds; each starts every command once.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write every run and the machine info to this file.",
)
@friendly_errors
def bench_startup(rounds: int, json_path: Path | None) -> None:
    """Time `oblivio --help` and `oblivio keys list` as whole processes (target 0.5 s)."""
    from oblivio_bench.startup import StartupBenchConfig, run_startup_bench

    report = run_startup_bench(
        StartupBenchConfig(rounds=rounds), progress=lambda line: click.echo(line, err=True)
    )
    _emit_figures(report, json_path)
