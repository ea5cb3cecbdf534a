"""``oblivio bench eventstore`` runs end to end, beside eventsourcing, and reports every figure."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from oblivio_bench.erasure import ErasureBenchConfig
from oblivio_bench.eventstore import BenchConfig, garbage_collection
from oblivio_bench.systems import BenchError
from tests._bench import invoke_bench, run_on_citus, run_on_postgres

WORKLOADS = {"append_single", "append_batch", "append_4_writers", "read_stream", "read_log"}
SYSTEMS = ("oblivio", "eventsourcing")


def run_bench(
    json_path: Path, backend: str, *global_options: str, bench_options: tuple[str, ...] = ()
) -> dict[str, Any]:
    options = ["--backend", backend, "--compare", "eventsourcing", "--rounds", "1"]
    report = invoke_bench(
        "eventstore", json_path, [*options, "--scale", "0.05", *bench_options], global_options
    )
    assert "ratio" in report["stdout"]
    assert "no cipher" in report["stdout"]  # the output says eventsourcing ran unencrypted
    return report


def assert_complete(report: dict[str, Any]) -> None:
    assert set(report["workloads"]) == WORKLOADS
    for name, workload in report["workloads"].items():
        for system in SYSTEMS:
            figures = workload[system]
            assert figures["median_events_per_s"] > 0, (name, system)
            assert figures["median_ms_per_op"] > 0, (name, system)
            assert len(figures["rounds"]) == 1
        assert workload["ratio"] > 0, name
    assert report["machine"]["cpu_count"] >= 1
    assert report["machine"]["packages"]["eventsourcing"].startswith("9.5")


def test_bench_eventstore_on_sqlite_compares_with_eventsourcing(tmp_path: Path) -> None:
    report = run_bench(tmp_path / "bench.json", "sqlite", "--data-dir", str(tmp_path / "unused"))

    assert report["backend"] == "sqlite"
    assert_complete(report)
    assert not (tmp_path / "unused").exists()  # scratch data lives in a temporary directory


def test_no_gc_pauses_the_collector_only_while_rounds_are_timed(tmp_path: Path) -> None:
    # In a process of its own: after each round the command collects the whole
    # heap, and the test process's heap (the whole suite's modules) took a
    # second to collect where the command's own takes milliseconds.
    json_path = tmp_path / "bench.json"
    options = ["--backend", "sqlite", "--compare", "eventsourcing", "--rounds", "1"]
    command = [*options, "--scale", "0.05", "--no-gc", "--json", str(json_path)]
    probe = "import sys; from oblivio.cli import main; main(sys.argv[1:])"
    result = subprocess.run(
        [sys.executable, "-c", probe, "--data-dir", str(tmp_path), "bench", "eventstore", *command],
        capture_output=True,
        text=True,
        check=False,
    )

    assert result.returncode == 0, result.stderr
    report = json.loads(json_path.read_text())
    assert_complete(report)
    assert report["machine"]["gc_in_rounds"] is False
    assert "garbage collector paused" in result.stdout


def test_the_collector_is_paused_inside_the_block_and_runs_again_after() -> None:
    with garbage_collection(enabled=False):
        assert not gc.isenabled()
    assert gc.isenabled()
    with garbage_collection(enabled=True):
        assert gc.isenabled()
    with pytest.raises(RuntimeError), garbage_collection(enabled=False):
        raise RuntimeError("a failing round")
    assert gc.isenabled()


def test_the_floor_script_runs_the_workloads_beside_both_systems(tmp_path: Path) -> None:
    json_path = tmp_path / "floor.json"
    script = Path(__file__).parents[1] / "benchmarks" / "eventstore_floor.py"
    arguments = ["--backend", "sqlite", "--rounds", "1", "--scale", "0.02", "--json", json_path]
    result = subprocess.run(
        [sys.executable, script, *arguments], capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stderr
    assert "oblivio/floor" in result.stdout
    rows = {row["workload"]: row for row in json.loads(json_path.read_text())}
    assert set(rows) == WORKLOADS
    assert rows["append_single"]["target"] == 1.0
    for row in rows.values():
        assert row["oblivio_ratio"] > 0
        assert row["floor_ratio"] > 0
        assert set(row["events_per_s"]) == {"oblivio", "eventsourcing", "floor"}


@pytest.mark.postgres
def test_the_single_append_floor_script_times_four_systems(postgres_server_url: str) -> None:
    script = Path(__file__).parents[1] / "benchmarks" / "single_append_floor.py"
    arguments = ["--appends", "4", "--database-url", postgres_server_url]
    result = subprocess.run(
        [sys.executable, script, *arguments], capture_output=True, text=True, check=False
    )

    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[2:6]}
    assert set(rows) == {"oblivio", "eventsourcing", "statements", "design"}
    for wall, cpu, ratio in rows.values():
        assert min(float(wall), float(cpu), float(ratio)) > 0
    assert rows["eventsourcing"][2] == "1.00"


@pytest.mark.postgres
@pytest.mark.slow
def test_bench_eventstore_on_postgres_drops_its_databases(
    tmp_path: Path, postgres_server_url: str
) -> None:
    assert_complete(run_on_postgres(run_bench, tmp_path, postgres_server_url))


def run_citus_bench(json_path: Path, backend: str, *global_options: str) -> dict[str, Any]:
    options = ["--backend", backend, "--rounds", "1", "--scale", "0.02"]
    return invoke_bench("eventstore", json_path, options, global_options)


@pytest.mark.citus
@pytest.mark.postgres
@pytest.mark.slow
def test_bench_eventstore_on_citus_measures_the_cluster_beside_one_server(
    tmp_path: Path, postgres_server_url: str
) -> None:
    report = run_on_citus(run_citus_bench, tmp_path, postgres_server_url)

    assert set(report["workloads"]) == WORKLOADS
    assert set(report["systems"]) == {"citus", "postgres"}
    assert "coordinator + 2 workers" in report["systems"]["citus"]["notes"]
    for name, workload in report["workloads"].items():
        for system in ("citus", "postgres"):
            assert workload[system]["median_events_per_s"] > 0, (name, system)
        assert workload["ratio"] > 0, name
    assert report["ratio"].startswith("citus events/s divided by postgres events/s")
    assert "at most 1.5x the single server" in report["stdout"]


def test_bench_eventstore_takes_citus_alone_not_beside_another_library() -> None:
    with pytest.raises(BenchError, match="not --compare"):
        BenchConfig(backend="citus", compare="eventsourcing")


def test_only_the_benchmarks_that_compare_with_one_server_take_citus() -> None:
    with pytest.raises(BenchError, match=r"backend must be one of sqlite, postgres$"):
        ErasureBenchConfig(backend="citus")
