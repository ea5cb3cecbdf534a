"""Benchmark results: medians, ratios, the printed table, the JSON document."""

from __future__ import annotations

import json
import os
import platform
import sqlite3
import statistics
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from oblivio_bench.config import CITUS, RunConfig
from oblivio_bench.workloads import PAYLOAD_BYTES, Measurement, Workload

PACKAGES = ("oblivio", "sqlalchemy", "psycopg", "cryptography", "eventsourcing")
RATIO_MEANING = (
    "{subject} events/s divided by {baseline} events/s of the adjacent round, median over rounds"
)

#: What the cluster's figures are held to (issue 31).
CITUS_TARGET = (
    "target: a single-subject workload (append_single, append_batch, read_stream) costs at "
    "most 1.5x the single server on the cluster: ratio at least 0.67"
)


@dataclass
class WorkloadResult:
    """Every round of one workload, per system, in the order they ran."""

    workload: Workload
    rounds: dict[str, list[Measurement]] = field(default_factory=dict)

    def add(self, system: str, measurement: Measurement) -> None:
        self.rounds.setdefault(system, []).append(measurement)

    def median_events_per_s(self, system: str) -> float:
        return statistics.median(m.events_per_s for m in self.rounds[system])

    def median_ms_per_op(self, system: str) -> float:
        return statistics.median(m.ms_per_op for m in self.rounds[system])

    def ratio(self, system: str, baseline: str) -> float:
        """Median over rounds of ``system``'s events/s over ``baseline``'s in the same round.

        The systems alternate round by round, so each pair ran back to back and
        shared whatever the machine was doing then; pairing cancels the drift
        that a ratio of the two medians would keep.
        """
        return paired_ratio(self.rounds[system], self.rounds[baseline])

    def ratio_of_medians(self, system: str, baseline: str) -> float:
        return self.median_events_per_s(system) / self.median_events_per_s(baseline)

    def to_json(self, baseline: str | None, subject: str) -> dict[str, Any]:
        w = self.workload
        parameters = {k: v for k, v in asdict(w).items() if k not in ("name", "title", "op")}
        document: dict[str, Any] = {
            "title": w.title,
            "op": w.op,
            "events_per_round": w.events_per_round,
            "ops_per_round": w.ops_per_round,
            "parameters": parameters,
        }
        for system, measurements in self.rounds.items():
            document[system] = {
                "median_events_per_s": self.median_events_per_s(system),
                "median_ms_per_op": self.median_ms_per_op(system),
                "rounds": [m.to_json() for m in measurements],
            }
        if baseline is not None:
            document["ratio"] = self.ratio(subject, baseline)
            document["ratio_of_medians"] = self.ratio_of_medians(subject, baseline)
        return document


@dataclass(frozen=True)
class BenchReport:
    """The outcome of one ``oblivio bench eventstore`` run."""

    config: RunConfig
    machine: Mapping[str, Any]
    #: Notes on each system, by name; the first is the subject of the ratios.
    systems: Mapping[str, str]
    results: Sequence[WorkloadResult]

    @property
    def subject(self) -> str:
        return next(iter(self.systems))

    @property
    def baseline(self) -> str | None:
        others = list(self.systems)[1:]
        return others[0] if others else None

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "benchmark": "oblivio bench eventstore",
            "backend": self.config.backend,
            "rounds": self.config.rounds,
            "scale": self.config.scale,
            "payload_bytes": PAYLOAD_BYTES,
            "machine": dict(self.machine),
            "systems": {name: {"notes": notes} for name, notes in self.systems.items()},
        }
        if self.baseline is not None:
            document["ratio"] = self._ratio_meaning()
        if self.config.backend == CITUS:
            document["target"] = CITUS_TARGET
        document["workloads"] = {
            r.workload.name: r.to_json(self.baseline, self.subject) for r in self.results
        }
        return document

    def write_json(self, path: Path) -> None:
        write_json_document(path, self.to_json())

    def table(self) -> str:
        """The human-readable summary printed to stdout."""
        lines = [self._heading(), "", render_table(self._header(), self._rows()), ""]
        lines += [f"  {r.workload.name}: ms/op is per {r.workload.op}" for r in self.results]
        if self.baseline is not None:
            lines.append(f"  ratio: {self._ratio_meaning()}")
            lines.append(f"  (below 1.00 {self.subject} is slower)")
        if self.config.backend == CITUS:
            lines.append(f"  {CITUS_TARGET}")
        for name, notes in self.systems.items():
            lines += textwrap.wrap(
                f"{name}: {notes}", width=100, initial_indent="  ", subsequent_indent="    "
            )
        return "\n".join(lines)

    def _ratio_meaning(self) -> str:
        return RATIO_MEANING.format(subject=self.subject, baseline=self.baseline)

    def _heading(self) -> str:
        gc_paused = not self.machine.get("gc_in_rounds", True)
        return (
            machine_heading("oblivio bench eventstore", self.config.backend, self.machine)
            + f"\nmedians over rounds (requested {self.config.rounds}, heavy workloads run half), "
            f"scale {self.config.scale:g}, ~{PAYLOAD_BYTES}-byte JSON payloads, "
            "systems interleaved round by round"
            + (", garbage collector paused in timed rounds" if gc_paused else "")
        )

    def _header(self) -> list[str]:
        header = ["workload", "events/round", "rounds"]
        for name in self.systems:
            header += [f"{name} ev/s", f"{name} ms/op"]
        return [*header, "ratio"] if self.baseline else header

    def _rows(self) -> list[list[str]]:
        rows = []
        for r in self.results:
            row = [r.workload.title, f"{r.workload.events_per_round:,}"]
            row.append(str(len(r.rounds[self.subject])))
            for name in self.systems:
                row += [f"{r.median_events_per_s(name):,.0f}", format_ms(r.median_ms_per_op(name))]
            if self.baseline is not None:
                row.append(f"{r.ratio(self.subject, self.baseline):.2f}")
            rows.append(row)
        return rows


def paired_ratio(subject: Sequence[Measurement], baseline: Sequence[Measurement]) -> float:
    """Median over rounds of ``subject``'s events/s over ``baseline``'s in the same round."""
    pairs = zip(subject, baseline, strict=True)
    return statistics.median(a.events_per_s / b.events_per_s for a, b in pairs)


def format_ms(value: float) -> str:
    """Milliseconds with three significant digits or more."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to fit: the first left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), rule, *(line(row) for row in rows)])


def machine_heading(benchmark: str, backend: str, machine: Mapping[str, Any]) -> str:
    """The first line of a printed report: which benchmark ran where, on what machine."""
    m = machine
    server = f", PostgreSQL {m['postgres']}" if m.get("postgres") else ""
    load = [m.get(k) for k in ("load_average_start", "load_average_end")]
    busy = f", load average {load[0][0]} → {load[1][0]}" if load[0] and load[1] else ""
    return (
        f"{benchmark} on {backend}: {m['date']}, {m['cpu_count']} CPUs{busy}, "
        f"Python {m['python']}, SQLite {m['sqlite']}{server}"
    )


def write_json_document(path: Path, document: Mapping[str, Any]) -> None:
    """A report's JSON document, indented; values JSON lacks (dates, paths) as text."""
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")


# -- machine ---------------------------------------------------------------------


def machine_info(
    postgres_version: str | None, packages: Sequence[str] = PACKAGES
) -> dict[str, Any]:
    """What the figures were measured on, with the versions of ``packages``."""
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "sqlite": sqlite3.sqlite_version,
        "postgres": postgres_version,
        "load_average_start": load_average(),
        "packages": {name: _package_version(name) for name in packages},
    }


def load_average() -> list[float] | None:
    """1, 5 and 15 minute load averages: how busy the shared machine was."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _package_version(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"
