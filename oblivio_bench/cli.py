"""``oblivio bench …``: the benchmark commands, a plugin of the ``oblivio`` command line.

The application does not import this package.  ``pyproject.toml`` registers
the ``bench`` group under the ``oblivio.commands`` entry point group, and
``oblivio.cli`` loads a command from there only when it is asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import update_wrapper
from pathlib import Path
from typing import Any, Protocol

import click

from oblivio.cli_support import F, embedder_name, friendly_errors, settings_from
from oblivio_bench.config import BACKENDS, CITUS, WITH_CITUS
from oblivio_bench.erasure import ErasureBenchConfig, run_erasure_bench
from oblivio_bench.eventstore import DEFAULT_SERVER_URL, BenchConfig, run_eventstore_bench
from oblivio_bench.memory import SECTIONS as MEMORY_SECTIONS
from oblivio_bench.memory import MemoryBenchConfig, run_memory_bench
from projections.scoring import ScoringConfig

_SERVER_BACKEND_HELP = (
    "SQLite in a temporary directory, or scratch databases on the PostgreSQL server of "
    f"--database-url / OBLIVIO_DATABASE_URL (default {DEFAULT_SERVER_URL})."
)
_CITUS_HELP = (
    " citus: a coordinator and two workers started for the run from the installed Citus "
    "extension, measured beside that server in the same run (ratios)."
)


def _backend_option(help_text: str, backends: tuple[str, ...] = BACKENDS) -> Callable[[F], F]:
    return click.option(
        "--backend",
        type=click.Choice(backends),
        default="sqlite",
        show_default=True,
        help=help_text,
    )


_json_option = click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write every figure and the machine info to this file.",
)


class _Report(Protocol):
    def table(self) -> str: ...

    def write_json(self, path: Path) -> None: ...


@dataclass(frozen=True)
class BenchRun:
    """What the shared options say: where a benchmark runs, how long, where figures go."""

    backend: str
    rounds: int
    scale: float
    server_url: str
    json_path: Path | None

    def config(self) -> dict[str, Any]:
        """The fields every benchmark's config takes from the shared options."""
        fields = asdict(self)
        del fields["json_path"]  # where the figures go is this command's business
        return fields

    def emit(self, report: _Report) -> None:
        _emit(report, self.json_path)


def _emit(report: _Report, json_path: Path | None) -> None:
    """Print the report's table; write its JSON document when --json asks for one."""
    click.echo(report.table())
    if json_path is not None:
        report.write_json(json_path)
        click.echo(f"\nfigures written to {json_path}", err=True)


def bench_options(
    *, rounds_help: str, scale_help: str, backends: tuple[str, ...] = BACKENDS
) -> Callable[[Callable[..., None]], F]:
    """The options every benchmark command shares (backend, JSON output, rounds, scale),
    handed to the command as one ``BenchRun`` before its own options."""
    help_text = _SERVER_BACKEND_HELP + (_CITUS_HELP if CITUS in backends else "")
    options = [
        _backend_option(help_text, backends),
        _json_option,
        click.option(
            "--rounds", type=click.IntRange(min=1), default=5, show_default=True, help=rounds_help
        ),
        click.option(
            "--scale",
            type=click.FloatRange(min=0, min_open=True),
            default=1.0,
            show_default=True,
            help=scale_help,
        ),
    ]

    def decorate(command: Callable[..., None]) -> Any:
        def with_run(
            ctx: click.Context,
            backend: str,
            json_path: Path | None,
            rounds: int,
            scale: float,
            **own: Any,
        ) -> None:
            command(BenchRun(backend, rounds, scale, _server_url(ctx), json_path), **own)

        update_wrapper(with_run, command)  # the help text and the command's own options
        decorated: Any = click.pass_context(friendly_errors(with_run))
        for option in reversed(options):
            decorated = option(decorated)
        return decorated

    return decorate


def _server_url(ctx: click.Context) -> str:
    return settings_from(ctx).database_url or DEFAULT_SERVER_URL


def _progress(line: str) -> None:
    click.echo(line, err=True)


@click.group()
def bench() -> None:
    """Benchmarks (see docs/benchmarks.md)."""


@bench.command("eventstore")
@bench_options(
    rounds_help="Rounds per workload (heavy workloads run half as many).",
    scale_help="Multiply every event count (e.g. 0.05 for a smoke run).",
    backends=WITH_CITUS,
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
def bench_eventstore(run: BenchRun, compare: str | None, gc_in_rounds: bool) -> None:
    """Time the log's appends and reads and print medians (progress goes to stderr)."""
    config = BenchConfig(**run.config(), compare=compare, gc_in_rounds=gc_in_rounds)
    run.emit(run_eventstore_bench(config, progress=_progress))


@bench.command("http")
@bench_options(
    rounds_help="Rounds per figure.",
    scale_help="Multiply every request count (e.g. 0.05 for a smoke run).",
)
def bench_http(run: BenchRun) -> None:
    """Store and retrieve over HTTP and through the facade with 1, 8 and 32 clients."""
    from oblivio_bench.http import HttpBenchConfig, run_http_bench  # starts servers: lazily

    run.emit(run_http_bench(HttpBenchConfig(**run.config()), progress=_progress))


@bench.command("memory")
@bench_options(
    rounds_help="Rounds of the store(), catch-up and ingest figures.",
    scale_help="Multiply every count, retrieval sizes included (e.g. 0.01 for a smoke run).",
    backends=WITH_CITUS,
)
@click.option(
    "--section",
    "sections",
    type=click.Choice(MEMORY_SECTIONS),
    multiple=True,
    help="Run only this measurement (repeatable); default: all of them.",
)
def bench_memory(run: BenchRun, sections: tuple[str, ...]) -> None:
    """Time store() beside a bare append, vector catch-up, and retrieval at 1k-100k nodes."""
    config = MemoryBenchConfig(**run.config(), sections=sections or MEMORY_SECTIONS)
    run.emit(run_memory_bench(config, progress=_progress))


@bench.command("recall")
@click.option(
    "--dataset",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="A directory of LoCoMo-format conversations (*.json).",
)
@click.option(
    "--scenarios",
    "scenario_files",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    multiple=True,
    help="A file of plain-speech correction, control and paraphrase scenarios "
    "(repeatable; see docs/benchmarks.md).",
)
@click.option(
    "--embedder",
    default="wordllama",
    show_default=True,
    callback=embedder_name,
    help="The embedder to measure, by name (as OBLIVIO_EMBEDDER takes it).",
)
@click.option(
    "--lexical-weight",
    type=float,
    default=None,
    help="ScoringConfig.lexical_weight to measure (default: the default ranking's).",
)
@click.option(
    "--lexical-normalisation",
    type=click.Choice(["attainable", "best"]),
    default=None,
    help="ScoringConfig.lexical_normalisation to measure (default: the default ranking's).",
)
@click.option(
    "--dense-margin-weight",
    type=float,
    default=None,
    help="ScoringConfig.dense_margin_weight to measure (default: the default ranking's).",
)
@click.option(
    "--session-context-weight",
    type=float,
    default=None,
    help="ScoringConfig.session_context_weight to measure (default: the default ranking's).",
)
@_backend_option("SQLite in a temporary directory, or a scratch database on --database-url.")
@_json_option
@click.pass_context
@friendly_errors
def bench_recall(
    ctx: click.Context,
    dataset: Path | None,
    scenario_files: tuple[Path, ...],
    embedder: str,
    lexical_weight: float | None,
    lexical_normalisation: str | None,
    dense_margin_weight: float | None,
    session_context_weight: float | None,
    backend: str,
    json_path: Path | None,
) -> None:
    """Recall@1/5/10 of retrieve() on LoCoMo, beside plain BM25 and plain cosine, and
    how plain-speech corrections, controls and paraphrases come back (--scenarios)."""
    from oblivio_bench.recall import RecallBenchConfig, run_recall_bench  # needs bm25s: lazily

    weights: dict[str, Any] = {
        name: value
        for name, value in (
            ("lexical_weight", lexical_weight),
            ("lexical_normalisation", lexical_normalisation),
            ("dense_margin_weight", dense_margin_weight),
            ("session_context_weight", session_context_weight),
        )
        if value is not None
    }
    config = RecallBenchConfig(
        dataset=dataset,
        embedder=embedder,
        backend=backend,
        server_url=_server_url(ctx),
        scoring=ScoringConfig(**weights) if weights else None,
        embedder_options=settings_from(ctx).embedder_options(),
        scenarios=scenario_files,
    )
    _emit(run_recall_bench(config, progress=_progress), json_path)


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
@click.option(
    "--sweep",
    "sweep",
    default=None,
    metavar="SIZES",
    help="Instead: time delete_event to a verified certificate for subjects of these "
    "sizes (comma-separated memories, times --scale; e.g. 1000,10000,50000), --rounds "
    "deletes each.",
)
def bench_erasure(run: BenchRun, subject_events: int, sweep: str | None) -> None:
    """Time forget to a verified certificate, and delete_event, as the store grows."""
    if sweep is not None:
        from oblivio_bench.delete_sweep import SweepConfig, run_delete_sweep

        sizes = _sizes(sweep)
        run.emit(run_delete_sweep(SweepConfig(**run.config(), sizes=sizes), progress=_progress))
        return
    config = ErasureBenchConfig(**run.config(), subject_events=subject_events)
    run.emit(run_erasure_bench(config, progress=_progress))


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise click.BadParameter(
            "sizes are comma-separated whole numbers", param_hint="--sweep"
        ) from None
    if not sizes or min(sizes) < 10:
        raise click.BadParameter("each size is at least 10 memories", param_hint="--sweep")
    return sizes


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

    report = run_startup_bench(StartupBenchConfig(rounds=rounds), progress=_progress)
    _emit(report, json_path)
