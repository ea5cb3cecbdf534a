"""Named figures with targets: what ``bench memory`` and ``bench erasure`` print and save.

A figure is one number with a unit (events/s, ms, a ratio…) and, where the
project set one, the target it should meet.  A target can be shown without
being judged (``applies=False``) when the run does not measure what the
target is about, e.g. a PostgreSQL target on SQLite or a 100,000-node target
at ``--scale 0.1``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oblivio_bench.config import RunConfig
from oblivio_bench.report import format_ms, machine_heading, render_table, write_json_document


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest value with ``q`` % of values at or below it.

    Never interpolated, so with fewer than 100 values the 99th percentile is
    the largest value measured.
    """
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def format_value(value: float, unit: str) -> str:
    if unit == "ms":
        return format_ms(value)
    if unit == "count":
        return f"{value:,.0f}"
    if unit in ("×", "fraction"):
        return f"{value:.3f}"  # three decimals: 0.4998 must not print as a met 0.50
    if unit == "s":
        return f"{value:,.0f}" if value >= 100 else f"{value:.1f}" if value >= 1 else f"{value:.2f}"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}"


@dataclass(frozen=True)
class Target:
    """The bound a figure should stay within: at most (``≤``) or at least (``≥``)."""

    bound: float
    at_most: bool

    def met(self, value: float) -> bool:
        return value <= self.bound if self.at_most else value >= self.bound

    def describe(self, unit: str) -> str:
        return f"{'≤' if self.at_most else '≥'} {format_value(self.bound, unit)}"


def at_most(bound: float) -> Target:
    return Target(bound, at_most=True)


def at_least(bound: float) -> Target:
    return Target(bound, at_most=False)


@dataclass(frozen=True)
class Figure:
    """One measured number."""

    key: str
    title: str
    value: float
    unit: str
    target: Target | None = None
    #: False when this run does not measure what the target is about.
    applies: bool = True

    @property
    def met(self) -> bool | None:
        if self.target is None or not self.applies:
            return None
        return self.target.met(self.value)

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "value": self.value,
            "unit": self.unit,
            "target": None if self.target is None else self.target.describe(self.unit),
            "target_applies": self.target is not None and self.applies,
            "met": self.met,
        }

    def cells(self) -> list[str]:
        target = "" if self.target is None else self.target.describe(self.unit)
        met = {None: "", True: "yes", False: "NO"}[self.met]
        if self.target is not None and not self.applies:
            target, met = f"({target})", "n/a"
        return [self.title, format_value(self.value, self.unit), self.unit, target, met]


@dataclass(frozen=True)
class Section:
    title: str
    figures: Sequence[Figure]
    notes: Sequence[str] = ()


@dataclass(frozen=True)
class FigureReport:
    """The outcome of one run: figures by section, the raw samples, the machine."""

    benchmark: str
    backend: str
    rounds: int
    scale: float
    machine: Mapping[str, Any]
    parameters: Mapping[str, Any]
    sections: Sequence[Section]
    #: Every round and sample behind the figures, for the JSON document.
    details: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of_run(
        cls,
        benchmark: str,
        config: RunConfig,
        machine: Mapping[str, Any],
        parameters: Mapping[str, Any],
        sections: Sequence[Section],
        details: Mapping[str, Any],
    ) -> FigureReport:
        """The report of a run of ``config``, named by its backend, rounds and scale."""
        return cls(
            benchmark,
            config.backend,
            config.rounds,
            config.scale,
            machine,
            parameters,
            sections,
            details,
        )

    def figures(self) -> list[Figure]:
        return [figure for section in self.sections for figure in section.figures]

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "backend": self.backend,
            "rounds": self.rounds,
            "scale": self.scale,
            "parameters": dict(self.parameters),
            "machine": dict(self.machine),
            "figures": {f.key: f.to_json() for f in self.figures()},
            "details": dict(self.details),
        }

    def write_json(self, path: Path) -> None:
        write_json_document(path, self.to_json())

    def table(self) -> str:
        """The human-readable summary printed to stdout."""
        lines = [self._heading()]
        for section in self.sections:
            header = [section.title, "value", "unit", "target", "met"]
            lines += ["", render_table(header, [f.cells() for f in section.figures])]
            lines += [f"  {note}" for note in section.notes]
        return "\n".join(lines)

    def _heading(self) -> str:
        heading = machine_heading(self.benchmark, self.backend, self.machine)
        return f"{heading}\nscale {self.scale:g}, rounds {self.rounds}"
