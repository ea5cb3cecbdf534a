"""Plain-speech scenarios for ``oblivio bench recall --scenarios FILE``.

A scenario file (the format of the development set described in
docs/benchmarks.md) holds three sets:

* **corrections**: an earlier statement (``old``), a later one that changes
  it in ordinary words (``new``), a question (``q``).  The first result of a
  default ``retrieve(q)`` should contain one of ``expect``; when it contains
  one of ``stale``, the answer is out of date.
* **controls**: the same shape, but the later message mentions the subject
  in passing or is about another person, so the earlier fact has to stay
  first: the first result must still contain ``expect``.
* **paraphrase**: facts one person stores with ``store()``, and questions
  worded without any content word of the fact they ask about (judged at top
  1 and top 3).

Every correction and control is a fresh person: the ``filler`` facts, then
``old``, then ``new``, each stored in one of three ways (:data:`MODES`):
``ingest()`` with ``first_person_owner=True`` and ``wait_for_extraction=True``
and ``occurred_at`` 2026-01-05 plus n days for the n-th filler fact, plus 30 days for
``old`` and 150 for ``new``; the same without ``first_person_owner``; and a
plain ``store()`` of the same sentences.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oblivio.client import MemoryClient
from oblivio_bench.figures import Figure, Section, at_least, at_most
from oblivio_bench.systems import BenchError

Progress = Callable[[str], None]

#: How the sentences of a scenario are stored (see the module docstring).
MODES = {
    "owner": "ingest(), first_person_owner",
    "ingest": "ingest(), no declaration",
    "store": "plain store()",
}
#: The issue's targets for 30 corrections and 16 controls and paraphrases, as shares
#: (a file of another size is judged in proportion); judged for the ``owner`` mode.
TARGET_CORRECTIONS_FIRST = 26 / 30
TARGET_STALE_FIRST = 2 / 30
TARGET_CONTROLS_KEPT = 15 / 16
TARGET_PARAPHRASE_TOP1 = 14 / 16
FIRST_DAY = datetime(2026, 1, 5, tzinfo=UTC)
OLD_DAY, NEW_DAY = 30, 150


@dataclass(frozen=True)
class Scenario:
    id: str
    old: str
    new: str
    question: str
    expect: tuple[str, ...]
    stale: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScenarioFile:
    name: str
    filler: tuple[str, ...]
    corrections: tuple[Scenario, ...]
    controls: tuple[Scenario, ...]
    facts: tuple[str, ...]
    paraphrases: tuple[tuple[str, tuple[str, ...]], ...]


def read_scenarios(path: Path) -> ScenarioFile:
    """One scenario file; a clear :class:`BenchError` when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        paraphrase = data["paraphrase"]
        read = ScenarioFile(
            name=path.stem,
            filler=tuple(str(f) for f in data["filler"]),
            corrections=tuple(_scenario(s) for s in data["corrections"]),
            controls=tuple(_scenario(s) for s in data["controls"]),
            facts=tuple(str(f) for f in paraphrase["facts"]),
            paraphrases=tuple(
                (str(q["q"]), _lowered(q["expect"])) for q in paraphrase["questions"]
            ),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BenchError(f"{path} is not a scenario file: {exc!r}") from exc
    ids = [s.id for s in (*read.corrections, *read.controls)]
    if len(set(ids)) != len(ids):
        raise BenchError(f"{path} is not a scenario file: two scenarios share an id")
    return read


def _scenario(raw: Mapping[str, Any]) -> Scenario:
    return Scenario(
        id=str(raw["id"]),
        old=str(raw["old"]),
        new=str(raw["new"]),
        question=str(raw["q"]),
        expect=_lowered(raw["expect"]),
        stale=_lowered(raw["stale"]) if "stale" in raw else (),
    )


def _lowered(values: Sequence[Any]) -> tuple[str, ...]:
    if isinstance(values, str) or not values:
        raise ValueError("expect and stale are non-empty lists of strings")
    return tuple(str(v).casefold() for v in values)


def _contains(text: str, wanted: Sequence[str]) -> bool:
    folded = text.casefold()
    return any(w in folded for w in wanted)


@dataclass
class _Outcome:
    """What the first results were, per scenario id (for the figures and the details)."""

    first: dict[str, str]

    def passed(self, scenarios: Sequence[Scenario]) -> list[str]:
        return [s.id for s in scenarios if _contains(self.first[s.id], s.expect)]

    def stale(self, scenarios: Sequence[Scenario]) -> list[str]:
        return [s.id for s in scenarios if s.stale and _contains(self.first[s.id], s.stale)]


def measure_scenarios(
    client: MemoryClient, scenarios: ScenarioFile, progress: Progress
) -> tuple[list[Section], dict[str, Any]]:
    """The sections of one scenario file, and per-scenario details for the JSON document."""
    sections: list[Section] = []
    details: dict[str, Any] = {}
    for mode, title in MODES.items():
        progress(f"scenarios {scenarios.name}: {title}")
        outcome = _Outcome(
            {
                s.id: _first_result(client, scenarios, s, mode, kind)
                for kind, group in (("c", scenarios.corrections), ("k", scenarios.controls))
                for s in group
            }
        )
        sections.append(_section(scenarios, mode, title, outcome))
        details[f"scenarios.{scenarios.name}.{mode}"] = outcome.first
    top1, top3, found = _paraphrases(client, scenarios)
    sections.append(_paraphrase_section(scenarios, top1, top3))
    details[f"scenarios.{scenarios.name}.paraphrase"] = found
    return sections, details


def _first_result(
    client: MemoryClient, scenarios: ScenarioFile, scenario: Scenario, mode: str, kind: str
) -> str:
    user = f"scenario-{scenarios.name}-{mode}-{kind}-{scenario.id}"
    said = [
        *((text, i) for i, text in enumerate(scenarios.filler)),
        (scenario.old, OLD_DAY),
        (scenario.new, NEW_DAY),
    ]
    for text, day in said:
        if mode == "store":
            client.store(text, user_id=user)
        else:
            client.ingest(
                text,
                user_id=user,
                occurred_at=FIRST_DAY + timedelta(days=day),
                first_person_owner=mode == "owner",
                wait_for_extraction=True,
            )
    found = client.retrieve(scenario.question, user_id=user, limit=1).nodes
    return found[0].content if found else ""


def _paraphrases(
    client: MemoryClient, scenarios: ScenarioFile
) -> tuple[int, int, dict[str, list[str]]]:
    user = f"scenario-{scenarios.name}-paraphrase"
    for fact in scenarios.facts:
        client.store(fact, user_id=user)
    top1 = top3 = 0
    found: dict[str, list[str]] = {}
    for question, expect in scenarios.paraphrases:
        ranked = [n.content for n in client.retrieve(question, user_id=user, limit=3).nodes]
        found[question] = ranked
        top1 += bool(ranked) and _contains(ranked[0], expect)
        top3 += any(_contains(text, expect) for text in ranked)
    return top1, top3, found


def _section(scenarios: ScenarioFile, mode: str, title: str, outcome: _Outcome) -> Section:
    corrections, controls = scenarios.corrections, scenarios.controls
    judged = mode == "owner"
    passed = outcome.passed(corrections)
    stale = outcome.stale(corrections)
    kept = outcome.passed(controls)
    key = f"scenarios.{scenarios.name}.{mode}"
    figures = [
        _count(
            f"{key}.corrections_first",
            "corrections: new fact first",
            passed,
            corrections,
            at_least(_share(TARGET_CORRECTIONS_FIRST, corrections)) if judged else None,
        ),
        _count(
            f"{key}.stale_first",
            "corrections: old fact still first",
            stale,
            corrections,
            at_most(math.floor(TARGET_STALE_FIRST * len(corrections))) if judged else None,
        ),
        _count(
            f"{key}.controls_kept",
            "controls: old fact kept first",
            kept,
            controls,
            at_least(_share(TARGET_CONTROLS_KEPT, controls)) if judged else None,
        ),
    ]
    missed = [s.id for s in corrections if s.id not in passed]
    lost = [s.id for s in controls if s.id not in kept]
    notes = [
        f"corrections missed: {' '.join(missed) or '-'}",
        f"controls lost: {' '.join(lost) or '-'}",
    ]
    return Section(f"scenarios {scenarios.name}: {title}", figures, notes)


def _paraphrase_section(scenarios: ScenarioFile, top1: int, top3: int) -> Section:
    asked = len(scenarios.paraphrases)
    key = f"scenarios.{scenarios.name}.paraphrase"
    return Section(
        f"scenarios {scenarios.name}: paraphrased questions, plain store()",
        [
            Figure(
                f"{key}.top1",
                f"found first (of {asked})",
                top1,
                "count",
                at_least(_share(TARGET_PARAPHRASE_TOP1, scenarios.paraphrases)),
            ),
            Figure(f"{key}.top3", f"found in the top 3 (of {asked})", top3, "count"),
        ],
    )


def _count(key: str, title: str, ids: Sequence[str], of: Sequence[Scenario], target: Any) -> Figure:
    return Figure(key, f"{title} (of {len(of)})", len(ids), "count", target)


def _share(share: float, of: Sequence[Any]) -> int:
    """The count a target share asks of a set of this size (rounded up)."""
    return math.ceil(share * len(of) - 1e-9)
