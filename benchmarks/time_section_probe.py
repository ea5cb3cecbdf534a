"""Where the time of ``oblivio bench memory --section time`` goes, retrieve by retrieve.

Runs the benchmark command unchanged in this process, with each timed retrieve
wrapped to record its wall time, the retrieving thread's CPU time, its phases
(state token, followers' catch-up, serving the index, ranking, access counts)
and every collection of the garbage collector that started and ended inside it.
Writes the records as JSON and prints, per workload, the wall and CPU p50/p99,
the median phase costs, how many retrieves held a collection, and the slowest
four.  Run it from the tree to measure (its ``.venv``), twice per pair of trees
for an A/B::

    python benchmarks/time_section_probe.py OUT.json \\
        --database-url postgresql://postgres@127.0.0.1:5432/postgres \\
        bench memory --backend postgres --section time

The wrapped names (``RetrievalService._token``/``_serve``/``_count_accesses``,
``LogFollower.catch_up``, ``retrieval_service.rank``) exist on main since the
time section did, so the same script measures both trees.
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import oblivio_bench.time_filters as tf
import projections.retrieval_service as rs
import workers.follower as follower

#: The record of the retrieve being timed (``None`` outside one).
current: dict[str, Any] | None = None
records: list[dict[str, Any]] = []
_collection_started = [0.0]
_workload: list[tuple[str, bool]] = []


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _collection_started[0] = time.perf_counter()
    elif current is not None:
        ms = (time.perf_counter() - _collection_started[0]) * 1000
        current["gc"].append((info["generation"], ms))


def _wrap(owner: Any, attr: str, label: str) -> None:
    original = getattr(owner, attr)

    def timed_phase(*args: Any, **kwargs: Any) -> Any:
        if current is None:
            return original(*args, **kwargs)
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            return original(*args, **kwargs)
        finally:
            phase = current["phases"].setdefault(label, [0.0, 0.0, 0])
            phase[0] += (time.perf_counter() - wall) * 1000
            phase[1] += (time.thread_time() - cpu) * 1000
            phase[2] += 1

    setattr(owner, attr, timed_phase)


def _install() -> None:
    global current
    gc.callbacks.append(_on_collection)
    _wrap(rs.RetrievalService, "_token", "token")
    _wrap(follower.LogFollower, "catch_up", "catch_up")
    _wrap(rs.RetrievalService, "_serve", "serve")
    _wrap(rs, "rank", "rank")
    _wrap(rs.RetrievalService, "_count_accesses", "accesses")
    timed_query = tf._timed_query

    def query(client: Any, rng: Any, name: str, after_store: bool) -> float:
        _workload[:] = [(name, after_store)]
        return timed_query(client, rng, name, after_store)

    def timed(action: Callable[[], Any]) -> tuple[float, Any]:
        global current
        if not _workload:  # the untimed first query
            start = time.perf_counter()
            result = action()
            return time.perf_counter() - start, result
        current = {"workload": _workload[0], "phases": {}, "gc": []}
        wall, cpu = time.perf_counter(), time.thread_time()
        result = action()
        current["wall"] = (time.perf_counter() - wall) * 1000
        current["cpu"] = (time.thread_time() - cpu) * 1000
        records.append(current)
        current = None
        return records[-1]["wall"] / 1000, result

    tf._timed_query = query
    tf.timed = timed  # type: ignore[attr-defined]  # the name time_filters calls


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def summary(found: list[dict[str, Any]]) -> list[str]:
    lines = []
    for workload in sorted({tuple(r["workload"]) for r in found}):
        mine = [r for r in found if tuple(r["workload"]) == workload]
        wall, cpu = [r["wall"] for r in mine], [r["cpu"] for r in mine]
        in_gc = [sum(ms for _, ms in r["gc"]) for r in mine]
        name, after = workload
        lines.append(
            f"{name:8} {'right after a store' if after else 'warm':20}"
            f" wall p50 {_percentile(wall, 50):6.1f} p99 {_percentile(wall, 99):6.1f} ms"
            f" | cpu p50 {_percentile(cpu, 50):5.1f} p99 {_percentile(cpu, 99):5.1f} ms"
            f" | {sum(1 for ms in in_gc if ms)} held a collection, longest {max(in_gc):.1f} ms"
        )
        phases = sorted({p for r in mine for p in r["phases"]})
        medians = {
            p: (
                round(statistics.median(r["phases"].get(p, [0, 0])[0] for r in mine), 2),
                round(statistics.median(r["phases"].get(p, [0, 0])[1] for r in mine), 2),
            )
            for p in phases
        }
        lines.append(f"    median phase (wall ms, cpu ms): {medians}")
        for r in sorted(mine, key=lambda r: -r["wall"])[:4]:
            collections = [(g, round(ms, 1)) for g, ms in r["gc"] if ms > 0.5]
            lines.append(f"    slow {r['wall']:.1f} cpu {r['cpu']:.1f} gc {collections}")
    return lines


def main(out: str, command: list[str]) -> None:
    _install()
    from oblivio.cli import main as cli

    try:
        cli(command)
    except SystemExit as done:
        if done.code not in (0, None):
            raise
    with open(out, "w") as f:
        json.dump(records, f)
    print("\n".join(summary(records)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
