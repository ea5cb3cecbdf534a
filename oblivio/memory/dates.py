"""Explicit absolute dates in a question, for ``retrieve(..., resolve_dates=True)``.

A question that names one year ("in 2023"), month ("in March 2024") or day
("on 8 May 2023", "May 8, 2023", "2023-05-08") is asked as of the end of that
period, in UTC: what held at its last moment is what the question most often
wants ("Where did I live in 2023?").  Relative expressions ("last year", "two
weeks ago") and questions naming several periods are left alone: they resolve
to nothing, and the question is asked of the present.
"""

from __future__ import annotations

import calendar
import re
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


def named_period_end(question: str) -> datetime | None:
    """The last moment of the one absolute period ``question`` names, else ``None``."""
    found: set[datetime] = set()
    text = question
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            end = _period_end(match)
            if end is None:
                return None  # a date that does not exist ("31 February 2023")
            found.add(end)
        text = pattern.sub(" ", text)  # a day's month and year are not periods of their own
    return found.pop() if len(found) == 1 else None


def _period_end(match: re.Match[str]) -> datetime | None:
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
            start = datetime(year + 1, 1, 1, tzinfo=UTC)
        elif parts.get("day"):
            start = datetime(year, month, int(parts["day"]), tzinfo=UTC) + timedelta(days=1)
        else:
            start = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    except ValueError:
        return None
    return start - _ONE_MOMENT
