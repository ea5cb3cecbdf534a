"""The one absolute period a question names: a year, a month or a day, in UTC.

A question that names one year ("in 2023"), month ("in March 2024") or day
("on 8 May 2023", "May 8, 2023", "2023-05-08") names that period.  Relative
expressions ("last year", "two weeks ago") and questions naming several
periods name none.

Two readers use it.  Ranking treats the period as one more term of the
question, held by the memories whose effective time falls within it
(:mod:`projections.retrieval_index`): "What did I cook on 9 May 2023?" then
matches what was said that day, where the words "9", "May" and "2023" match
nothing the person said.  ``retrieve(..., resolve_dates=True)`` asks the
question as of the period's last moment: what held then is what a question
such as "Where did I live in 2023?" most often wants.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

_MONTHS = {
    name.lower(): number
    for number in range(1, 13)
    for name in (calendar.month_name[number], calendar.month_abbr[number])
}
_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:1[89]|2[01])\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
#: Most specific first: a day's pattern is found before the month or year in it.
_PATTERNS = (
    re.compile(rf"\b{_YEAR}-(?P<month_number>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH}\s*,?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY}\s*,?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s*,?\s+{_YEAR}\b", re.IGNORECASE),
    # A bare year only after a word that makes it a time ("in 2023", not "my 2019 bike").
    re.compile(rf"\b(?:in|during|throughout|by|of|until|end of)\s+{_YEAR}\b", re.IGNORECASE),
)
_ONE_MOMENT = timedelta(microseconds=1)


@dataclass(frozen=True)
class NamedPeriod:
    """A period a question names: ``[start, end)`` in UTC, and the question without
    the words that name it (``rest``)."""

    start: datetime
    end: datetime
    rest: str

    @property
    def last_moment(self) -> datetime:
        return self.end - _ONE_MOMENT


def named_period(question: str) -> NamedPeriod | None:
    """The one absolute period ``question`` names, else ``None``."""
    found: set[tuple[datetime, datetime]] = set()
    rest = question
    for pattern in _PATTERNS:
        for match in pattern.finditer(rest):
            period = _period(match)
            if period is None:
                return None  # a date that does not exist ("31 February 2023")
            found.add(period)
        rest = pattern.sub(" ", rest)  # a day's month and year are not periods of their own
    if len(found) != 1:
        return None
    [(start, end)] = found
    return NamedPeriod(start, end, rest)


def _period(match: re.Match[str]) -> tuple[datetime, datetime] | None:
    parts = match.groupdict()
    year = int(parts["year"])
    month = (
        int(parts["month_number"])
        if parts.get("month_number")
        else _MONTHS[parts["month"].lower()]
        if parts.get("month")
        else None
    )
    try:
        if month is None:
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        if parts.get("day"):
            day = datetime(year, month, int(parts["day"]), tzinfo=UTC)
            return day, day + timedelta(days=1)
        start = datetime(year, month, 1, tzinfo=UTC)
        return start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    except ValueError:
        return None
