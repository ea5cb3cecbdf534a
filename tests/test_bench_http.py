"""``oblivio bench http`` runs a real server beside the facade and reports every figure."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from oblivio_bench.http import run_round
from tests._bench import invoke_bench, run_on_postgres

OPERATIONS = ("store", "retrieve")
CLIENTS = ("1", "8", "32")
SYSTEMS = ("http", "remote", "facade")
FIGURES = ("median_requests_per_s", "median_p50_ms", "median_p99_ms", "median_mean_ms")


def run_bench(json_path: Path, backend: str, *global_options: str) -> dict[str, Any]:
    options = ["--backend", backend, "--rounds", "1", "--scale", "0.02"]
    report = invoke_bench("http", json_path, options, global_options)
    assert "overhead" in report["stdout"]
    assert "target (overhead ≤ 3 at 8 clients)" in report["stdout"]
    return report


def assert_complete(report: dict[str, Any]) -> None:
    assert set(report["operations"]) == set(OPERATIONS)
    for operation in OPERATIONS:
        cells = report["operations"][operation]
        assert set(cells) == set(CLIENTS), operation
        for clients, cell in cells.items():
            assert cell["requests_per_round"] == int(clients) * cell["requests_per_client"]
            for system in SYSTEMS:
                figures = cell[system]
                where = (operation, clients, system)
                assert all(figures[name] > 0 for name in FIGURES), where
                assert figures["median_p99_ms"] >= figures["median_p50_ms"], where
                cpu = figures["median_cpu_ms_per_request"]  # read from /proc on Linux only
                assert cpu > 0 if sys.platform == "linux" else cpu is None or cpu > 0, where
                [timed] = figures["rounds"]
                assert timed["requests"] == cell["requests_per_round"], where
            ratios = ("overhead", "p50_ratio", "p99_ratio", "remote_overhead")
            assert all(cell[name] > 0 for name in ratios)
            assert "cpu_ratio" in cell
    target = report["target"]
    assert target["clients"] == 8
    assert set(target["met"]) == set(OPERATIONS)
    assert set(target["remote_overhead"]) == set(OPERATIONS)
    assert report["machine"]["packages"]["uvicorn"]
    assert report["machine"]["http_parser"] in ("h11", "httptools")


def test_bench_http_on_sqlite_reports_every_figure(tmp_path: Path) -> None:
    report = run_bench(tmp_path / "bench.json", "sqlite", "--data-dir", str(tmp_path / "unused"))

    assert report["backend"] == "sqlite"
    assert_complete(report)
    assert not (tmp_path / "unused").exists()  # scratch data lives in a temporary directory


@pytest.mark.postgres
@pytest.mark.slow
def test_bench_http_on_postgres_drops_its_databases(
    tmp_path: Path, postgres_server_url: str
) -> None:
    assert_complete(run_on_postgres(run_bench, tmp_path, postgres_server_url))


def test_a_round_is_timed_from_before_the_first_request() -> None:
    """The clock starts before any client is released, so a round is never shorter than
    the requests of any one client (it once started after the barrier, in the main thread,
    and short rounds on a loaded machine came out with a negative duration)."""
    for _ in range(50):
        result = run_round([lambda n: time.sleep(0.0002)] * 4, 3, lambda: (0.0, 0.0))
        assert result.seconds >= 3 * 0.0002
        assert result.seconds >= max(result.p99_ms, result.mean_ms) / 1000
