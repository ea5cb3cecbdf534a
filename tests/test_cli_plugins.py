"""``oblivio bench`` is a plugin: the application never imports the benchmarks."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from oblivio.cli import main


def run_python(probe: str) -> None:
    """Run ``probe`` in a fresh interpreter, which must exit cleanly."""
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_application_imports_no_benchmark_code() -> None:
    probe = (
        "import sys, oblivio, oblivio.cli, oblivio.http, oblivio.client, oblivio.mcp_server;"
        "from oblivio.cli import main;"
        "bench = sorted(m for m in sys.modules if m.startswith('oblivio_bench'));"
        "print(bench); assert not bench and 'bench' in main.list_commands(None)"
    )
    run_python(probe)


def test_the_bench_commands_come_through_the_entry_point() -> None:
    result = CliRunner().invoke(main, ["bench", "--help"])
    assert result.exit_code == 0, result.output
    for command in ("eventstore", "memory", "erasure", "http"):
        assert command in result.output


def test_an_unknown_command_is_still_refused() -> None:
    result = CliRunner().invoke(main, ["no-such-command"])
    assert result.exit_code != 0
    assert "No such command" in result.output


def test_without_the_benchmarks_installed_there_is_no_bench_command() -> None:
    """As in the container image, which carries the entry point but not the package."""
    probe = (
        "import sys; sys.modules['oblivio_bench'] = None;"  # importing it now fails
        "from click.testing import CliRunner; from oblivio.cli import main;"
        "listing = CliRunner().invoke(main, ['--help']);"
        "assert listing.exit_code == 0 and ' bench ' not in listing.output, listing.output;"
        "run = CliRunner().invoke(main, ['bench', 'eventstore']);"
        "assert run.exit_code != 0 and 'No such command' in run.output, run.output"
    )
    run_python(probe)
