"""``oblivio bench memory`` and ``oblivio bench erasure`` run end to end and report every figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oblivio_bench.figures import percentile
from tests._bench import assert_ran_on_postgres, drops_its_databases, invoke_bench, run_on_citus

TIERS = ("1k", "10k", "100k")
PHASES = ("10k", "500k")
RETRIEVAL_FIGURES = {
    f"{prefix}_{tier}_{suffix}"
    for tier in TIERS
    for prefix, suffix in (
        ("retrieve", "p50_ms"),
        ("retrieve", "p99_ms"),
        ("retrieve", "after_store_p99_ms"),
        ("retrieve", "first_ms"),
        ("retrieval", "load_s"),
        ("retrieval", "catch_up_events_per_s"),
    )
}
INGEST_FIGURES = {
    "ingest_store_events_per_s",
    "ingest_events_per_s",
    "extraction_events_per_s",
    "ingest_store_ratio",
    "extraction_store_ratio",
}
REEMBED_FIGURES = {"reembed_nodes_per_s", "reembed_cpu_nodes_per_s"}
TIME_FIGURES = {"retrieve_time_first_ms"} | {
    f"retrieve_{name}{after}_{figure}"
    for name in ("plain", "as_of", "filters")
    for after in ("", "_after_store")
    for figure in ("p50_ms", "p99_ms", *(() if name == "plain" else ("p50_ratio", "p99_ratio")))
}
#: The cold-start figures at MEMORY_SMOKE's scale (10,000, 30,000, 100,000 × 0.005).
COLD_FIGURES = {
    f"cold_{figure}_{nodes}_s"
    for nodes in (50, 150, 500)
    for figure in (
        "first_retrieve",
        "built_first_retrieve",
        "second_retrieve",
        "imports",
        "open",
        "model",
        "catch_up",
    )
} | {f"cold_image_ratio_{nodes}" for nodes in (50, 150, 500)}
MEMORY_FIGURES = (
    {
        "store_events_per_s",
        "append_events_per_s",
        "store_append_ratio",
        "catch_up_events_per_s",
    }
    | RETRIEVAL_FIGURES
    | INGEST_FIGURES
    | REEMBED_FIGURES
    | TIME_FIGURES
    | COLD_FIGURES
)
ERASURE_FIGURES = {"forget_growth_ratio"} | {
    name.format(phase)
    for phase in PHASES
    for name in (
        "forget_{}_median_ms",
        "forget_{}_max_ms",
        "delete_event_{}_ops_per_s",
        "delete_certified_{}_ops_per_s",
        "background_{}_load_s",
        "background_{}_load_events_per_s",
        "background_{}_catch_up_events_per_s",
    )
}
MEMORY_SMOKE = ("--rounds", "1", "--scale", "0.005")
ERASURE_SMOKE = ("--rounds", "1", "--scale", "0.002", "--subject-events", "6")


def run_bench(command: str, json_path: Path, *options: str) -> dict[str, Any]:
    global_options, bench_options = _split(options)
    report = invoke_bench(command, json_path, bench_options, global_options)
    assert "target" in report["stdout"]
    return report


def _split(options: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Options before ``bench`` (``--data-dir``, ``--database-url``) and after it."""
    if options and options[0] in ("--data-dir", "--database-url"):
        return list(options[:2]), list(options[2:])
    return [], list(options)


def assert_figures(report: dict[str, Any], expected: set[str]) -> None:
    figures = report["figures"]
    assert set(figures) == expected
    for key, figure in figures.items():
        assert figure["value"] > 0, key
        assert figure["title"], key
        assert figure["unit"], key
        assert figure["met"] in (True, False, None), key
    assert report["machine"]["cpu_count"] >= 1


def test_bench_memory_on_sqlite_reports_every_figure(tmp_path: Path) -> None:
    unused = tmp_path / "unused"
    options = ("--data-dir", str(unused), "--backend", "sqlite", *MEMORY_SMOKE)
    report = run_bench("memory", tmp_path / "m.json", *options)

    assert report["benchmark"] == "oblivio bench memory"
    assert_figures(report, MEMORY_FIGURES)
    assert set(report["details"]["retrieval"]) == set(TIERS)
    assert report["details"]["retrieval"]["100k"]["nodes"] == 500  # 100,000 × 0.005
    assert report["figures"]["catch_up_events_per_s"]["target_applies"] is False  # PostgreSQL's
    assert not unused.exists()  # scratch data lives in a temporary directory
    # Each cold-start probe was a process of its own that retrieved from the subject.
    [cold] = [c for c in report["details"]["cold"] if c["nodes"] == 500]
    assert len(cold["probes"]) == len(cold["built"]) == 1  # one with the image, one without
    assert cold["median_first_retrieve_s"] > cold["median_second_retrieve_s"] > 0


def test_bench_memory_runs_only_the_chosen_section(tmp_path: Path) -> None:
    options = ("--backend", "sqlite", "--section", "retrieval", *MEMORY_SMOKE)
    report = run_bench("memory", tmp_path / "r.json", *options)

    assert_figures(report, RETRIEVAL_FIGURES)
    assert report["details"]["store"] == []
    assert report["details"]["catch_up"] == []


def test_bench_memory_ingest_section(tmp_path: Path) -> None:
    options = ("--backend", "sqlite", "--section", "ingest", "--rounds", "2", "--scale", "0.01")
    report = run_bench("memory", tmp_path / "i.json", *options)

    assert_figures(report, INGEST_FIGURES)
    assert [r["events"] for r in report["details"]["ingest"]["extraction"]] == [10, 10]
    assert report["figures"]["ingest_store_ratio"]["target_applies"] is True


def test_bench_memory_time_section(tmp_path: Path) -> None:
    options = ("--backend", "sqlite", "--section", "time", "--rounds", "1", "--scale", "0.02")
    report = run_bench("memory", tmp_path / "t.json", *options)

    assert_figures(report, TIME_FIGURES)
    [details] = report["details"]["time"]
    assert details["nodes"] == 200  # 10,000 × 0.02
    assert len(details["as_of_after_store_ms"]) == 5  # the fewest queries a figure takes
    # The 20 ms target is judged at 10,000 nodes only.
    assert report["figures"]["retrieve_as_of_p99_ms"]["target_applies"] is False


def test_bench_memory_reembed_section(tmp_path: Path) -> None:
    options = ("--backend", "sqlite", "--section", "reembed", "--rounds", "2", "--scale", "0.01")
    report = run_bench("memory", tmp_path / "v.json", *options)

    assert_figures(report, REEMBED_FIGURES)
    rounds = report["details"]["reembed"]
    # Every round moves the whole store (200 nodes) to the next wordllama size.
    assert [(r["embedder"], r["nodes"]) for r in rounds] == [
        ("wordllama", 200),
        ("wordllama:128", 200),
    ]
    assert report["figures"]["reembed_nodes_per_s"]["target_applies"] is True


def test_bench_erasure_on_sqlite_reports_every_figure(tmp_path: Path) -> None:
    report = run_bench("erasure", tmp_path / "e.json", "--backend", "sqlite", *ERASURE_SMOKE)

    assert report["benchmark"] == "oblivio bench erasure"
    assert_figures(report, ERASURE_FIGURES)
    assert report["details"]["500k"]["background_events"] == 1_000  # 500,000 × 0.002
    assert report["parameters"]["deletes_per_phase"] == 3


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("command", "options", "expected"),
    [("memory", MEMORY_SMOKE, MEMORY_FIGURES), ("erasure", ERASURE_SMOKE, ERASURE_FIGURES)],
)
def test_bench_on_postgres_reports_every_figure_and_drops_its_database(
    tmp_path: Path,
    postgres_server_url: str,
    command: str,
    options: tuple[str, ...],
    expected: set[str],
) -> None:
    database = ("--database-url", postgres_server_url, "--backend", "postgres")
    with drops_its_databases(postgres_server_url):
        report = run_bench(command, tmp_path / "b.json", *database, *options)

    assert_ran_on_postgres(report)
    assert_figures(report, expected)


@pytest.mark.citus
@pytest.mark.postgres
@pytest.mark.slow
def test_bench_memory_on_citus_reports_both_stores_and_the_clusters_cost(
    tmp_path: Path, postgres_server_url: str
) -> None:
    sections = ("--section", "store", "--section", "retrieval")

    def run_memory(json_path: Path, backend: str, *global_options: str) -> dict[str, Any]:
        options = (*global_options, "--backend", backend, *sections, *MEMORY_SMOKE)
        return run_bench("memory", json_path, *options)

    report = run_on_citus(run_memory, tmp_path, postgres_server_url)

    store = {"store_events_per_s", "append_events_per_s", "store_append_ratio"}
    measured = store | RETRIEVAL_FIGURES
    costs = {"citus_cost_store", "citus_cost_append"} | {
        f"citus_cost_retrieve_{tier}{after}_p50" for tier in TIERS for after in ("", "_after_store")
    }
    assert_figures(report, measured | {f"server_{key}" for key in measured} | costs)
    for key in costs:
        assert report["figures"][key]["target"] == "≤ 1.500", key
    assert report["details"]["server"]["retrieval"]["1k"]["nodes"] == 5  # 1,000 × 0.005
    assert "Citus (coordinator + 2 workers) over one PostgreSQL server" in report["stdout"]


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]
    assert percentile(values, 50) == 10.0
    assert percentile(values, 99) == 20.0  # below 100 samples: the slowest
    assert percentile([3.0], 99) == 3.0


def test_bench_erasure_sweep_reports_every_size_and_its_proofs(tmp_path: Path) -> None:
    options = ("--backend", "sqlite", "--rounds", "2", "--sweep", "20,40")
    report = run_bench("erasure", tmp_path / "s.json", *options)

    assert report["benchmark"] == "oblivio bench erasure --sweep"
    sizes = ("20", "40")
    assert_figures(
        report,
        {"certified_delete_growth_ratio"}
        | {
            name.format(size)
            for size in sizes
            for name in (
                "certified_delete_{}_median_ms",
                "certified_delete_{}_max_ms",
                "certified_delete_{}_first_ms",
                "load_{}_s",
                "catch_up_{}_s",
                "snapshot_build_{}_s",
            )
        },
    )
    # With the snapshots built beforehand, each proof replays only its part, the first too.
    assert {r for size in sizes for r in report["details"][size]["replayed"]} == {"part"}
