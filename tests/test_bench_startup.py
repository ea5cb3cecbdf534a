"""``oblivio bench startup`` runs the commands it times and reports every figure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from oblivio_bench.startup import LIBRARIES
from tests.test_bench_memory_erasure import run_bench

FIGURES = {
    "help_wall_ms",
    "help_cpu_ms",
    "keys_list_wall_ms",
    "keys_list_cpu_ms",
    "python_wall_ms",
    "keys_list_over_python",
    "libraries_wall_ms",
    "keys_list_over_libraries",
}


def test_bench_startup_times_help_and_keys_list(tmp_path: Path) -> None:
    report = run_bench("startup", tmp_path / "s.json", "--rounds", "1")
    assert report["benchmark"] == "oblivio bench startup"
    assert set(report["figures"]) == FIGURES
    assert report["figures"]["keys_list_wall_ms"]["target"] == "≤ 500"
    runs = report["details"]
    assert set(runs) == {"help", "keys_list", "python", "libraries"}
    # Every figure is a real process's: longer than nothing, the command slower than
    # the bare interpreter it runs on.
    assert all(r["wall_s"] > 0 and r["cpu_s"] > 0 for found in runs.values() for r in found)
    assert report["figures"]["keys_list_over_python"]["value"] > 1
    # How keys list compares with importing its libraries is a figure the benchmark prints,
    # not something a test can hold on a loaded machine (one round measured 0.66 there).
    assert report["figures"]["keys_list_over_libraries"]["value"] > 0


def test_the_floor_sets_the_collector_up_as_the_command_line_does() -> None:
    # The ratio keys list / libraries is like for like only if both processes
    # collect alike: same thresholds, both frozen at exit (oblivio.cli).
    def probe(setup: str) -> str:
        code = (
            "import atexit, gc, sys\n"
            "atexit.register(lambda: sys.stdout.write(str(gc.get_freeze_count() > 0)))\n"
            f"{setup}\n"
            "sys.stdout.write(repr(gc.get_threshold()))\n"
        )
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
        ).stdout

    assert probe(LIBRARIES) == probe("import oblivio.cli") == "(2000, 10, 10)True"
