"""The one absolute period a question names (projections.dates): what ranking holds
as a term and what ``resolve_dates`` asks as of."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from projections.dates import named_period


def _utc(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, tzinfo=UTC)


@pytest.mark.parametrize(
    ("question", "start", "end"),
    [
        ("What did I cook on 9 May 2023?", _utc(2023, 5, 9), _utc(2023, 5, 10)),
        ("What did I cook on May 9th, 2023?", _utc(2023, 5, 9), _utc(2023, 5, 10)),
        ("What did I cook on 2023-05-09?", _utc(2023, 5, 9), _utc(2023, 5, 10)),
        ("What did I cook on the 31st of December, 2023?", _utc(2023, 12, 31), _utc(2024, 1, 1)),
        ("Where did I swim in Sep. 2022?", _utc(2022, 9, 1), _utc(2022, 10, 1)),
        ("Where did I swim in December 2022?", _utc(2022, 12, 1), _utc(2023, 1, 1)),
        ("Where did I live in 2021?", _utc(2021, 1, 1), _utc(2022, 1, 1)),
    ],
)
def test_a_day_a_month_or_a_year_is_named(question: str, start: datetime, end: datetime) -> None:
    period = named_period(question)
    assert period is not None
    assert (period.start, period.end) == (start, end)
    assert period.last_moment == end - timedelta(microseconds=1)  # what resolve_dates asks


def test_the_rest_of_the_question_keeps_every_other_word() -> None:
    period = named_period("What did Priya bake for the fair on 14 March 2024?")
    assert period is not None
    assert period.rest.split() == ["What", "did", "Priya", "bake", "for", "the", "fair", "on", "?"]


@pytest.mark.parametrize(
    "question",
    [
        "What did I cook last week?",  # relative: asked of the present
        "Did I move between March 2022 and June 2023?",  # two periods
        "What happened on 31 February 2023?",  # no such day
        "Is my 2019 bike still in the shed?",  # a year that is not a time
        "May I ask what you remember?",
    ],
)
def test_no_single_absolute_period_is_none(question: str) -> None:
    assert named_period(question) is None
