"""Rule-based time expressions and query modes (rotmem.memory.temporal.time_expressions)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rotmem.data import date_of, day_of
from rotmem.memory.temporal.time_expressions import (
    QueryMode,
    TimeSpan,
    as_day,
    extract_time,
    find_times,
    query_mode,
)

REF = "2013-03-15"  # a Friday


def span(text: str, ref: str = REF) -> tuple[str, str] | None:
    found = extract_time(text, ref)
    return None if found is None else (date_of(found.start), date_of(found.end))


@pytest.mark.parametrize(
    "text, start, end",
    [
        ("She moved in 2012.", "2012-01-01", "2012-12-31"),
        ("on 3 May 2011", "2011-05-03", "2011-05-03"),
        ("on the 3rd of May, 2011", "2011-05-03", "2011-05-03"),
        ("May 3, 2011", "2011-05-03", "2011-05-03"),
        ("2011-05-03", "2011-05-03", "2011-05-03"),
        ("in May 2011", "2011-05-01", "2011-05-31"),
        ("in May of 2011", "2011-05-01", "2011-05-31"),
        ("Sept 2010", "2010-09-01", "2010-09-30"),
        ("February 2012", "2012-02-01", "2012-02-29"),
        ("last March", "2012-03-01", "2012-03-31"),
        ("this March", "2013-03-01", "2013-03-31"),
        ("next March", "2014-03-01", "2014-03-31"),
        ("last January", "2013-01-01", "2013-01-31"),
        ("next April", "2013-04-01", "2013-04-30"),
        ("in March", "2013-03-01", "2013-03-31"),
        ("in June", "2012-06-01", "2012-06-30"),
        ("two years ago", "2011-03-15", "2011-03-15"),
        ("3 days ago", "2013-03-12", "2013-03-12"),
        ("a few weeks ago", "2013-02-22", "2013-02-22"),
        ("a couple of months ago", "2013-01-15", "2013-01-15"),
        ("in 2 weeks", "2013-03-29", "2013-03-29"),
        ("last year", "2012-01-01", "2012-12-31"),
        ("this year", "2013-01-01", "2013-12-31"),
        ("next month", "2013-04-01", "2013-04-30"),
        ("last month", "2013-02-01", "2013-02-28"),
        ("last week", "2013-03-04", "2013-03-10"),
        ("yesterday", "2013-03-14", "2013-03-14"),
        ("Today", "2013-03-15", "2013-03-15"),
        ("tomorrow", "2013-03-16", "2013-03-16"),
        ("the day before yesterday", "2013-03-13", "2013-03-13"),
        ("last Monday", "2013-03-11", "2013-03-11"),
        ("last Friday", "2013-03-08", "2013-03-08"),
        ("next Friday", "2013-03-22", "2013-03-22"),
        ("this Monday", "2013-03-11", "2013-03-11"),
        ("Feb 30, 2012", "2012-01-01", "2012-12-31"),  # no such day: the year is still read
    ],
)
def test_expressions_resolve_against_the_reference_day(text: str, start: str, end: str) -> None:
    assert span(text) == (start, end)


@pytest.mark.parametrize(
    "text", ["Where does she live now?", "This may take a while.", "I have 12 cats", "It cost 3000 dollars"]
)
def test_text_without_a_time_gives_none(text: str) -> None:
    assert extract_time(text, REF) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I tried Cyberpunk 2077 yesterday", ["2013-03-14"]),  # a game's name, not a year
        ("We watched Blade Runner 2049", []),
        ("I want to retire by 2049", ["2049-01-01..2049-12-31"]),  # a preposition: a time
        ("in 2030 we move", ["2030-01-01..2030-12-31"]),
        ("born in 1961", ["1961-01-01..1961-12-31"]),  # the far past is a time
        ("she moved in 2020, then 2021", ["2020-01-01..2020-12-31", "2021-01-01..2021-12-31"]),
        ("from 2010-2012", ["2010-01-01..2010-12-31", "2012-01-01..2012-12-31"]),
        ("Photo%2023.07.23,%2014%2034%2052.jpg", []),  # digits inside a URL
        ("see https://example.com/2019/img_2012.png", []),
        ("the 2012 season ended.", ["2012-01-01..2012-12-31"]),
        ("Where did Ana live in 2012?", ["2012-01-01..2012-12-31"]),
        ("Was it 2011, 2012!", ["2011-01-01..2011-12-31", "2012-01-01..2012-12-31"]),
    ],
)
def test_bare_years_inside_names_and_urls_are_not_times(text: str, expected: list[str]) -> None:
    assert [str(s) for s in find_times(text, REF)] == expected


def test_month_end_is_clamped_when_counting_months() -> None:
    assert span("a month ago", "2013-03-31") == ("2013-02-28", "2013-02-28")
    assert span("a year ago", "2012-02-29") == ("2011-02-28", "2011-02-28")


def test_overlapping_matches_keep_the_leftmost_longest_one() -> None:
    found = find_times("I moved on 3 May 2011, two years ago, and again in 2012.", REF)
    assert [str(s) for s in found] == ["2011-05-03", "2011-03-15", "2012-01-01..2012-12-31"]
    assert [s.text for s in found] == ["3 May 2011", "two years ago", "2012"]


@given(
    ref=st.dates(dt.date(1950, 1, 1), dt.date(2090, 12, 31)),
    n=st.integers(1, 400),
    unit=st.sampled_from(["day", "week"]),
)
def test_days_and_weeks_ago_count_back_exactly(ref: dt.date, n: int, unit: str) -> None:
    plural = "s" if n > 1 else ""
    found = extract_time(f"{n} {unit}{plural} ago", ref)
    assert found is not None and found.is_day
    assert found.start == as_day(ref) - n * (7 if unit == "week" else 1)


@given(ref=st.dates(dt.date(1950, 1, 1), dt.date(2090, 12, 31)))
def test_relative_spans_hold_their_defining_property(ref: dt.date) -> None:
    last_year = extract_time("last year", ref)
    assert (date_of(last_year.start), date_of(last_year.end)) == (
        f"{ref.year - 1}-01-01",
        f"{ref.year - 1}-12-31",
    )
    last_week = extract_time("last week", ref)
    assert last_week.end - last_week.start == 6
    assert dt.date.fromisoformat(date_of(last_week.start)).weekday() == 0
    assert 1 <= as_day(ref) - last_week.end <= 7
    for month in ("January", "July", "December"):
        last = extract_time(f"last {month}", ref)
        assert last.end < as_day(ref.replace(day=1))  # ended before the reference month began
        assert as_day(ref) - last.start < 2 * 366  # and is the latest such month


@given(day=st.integers(-20000, 40000))
def test_iso_dates_round_trip(day: int) -> None:
    date = date_of(day)
    if not 1900 <= int(date[:4]) <= 2099:
        return
    found = extract_time(f"it happened on {date}.", "2000-01-01")
    assert found == TimeSpan(day, day, date)


def test_timespan_properties_and_validation() -> None:
    s = TimeSpan(day_of("2012-01-01"), day_of("2012-12-31"))
    assert s.midpoint == day_of("2012-07-01") + 0.5  # 366 days: the middle falls at noon on 1 July
    assert s.contains(day_of("2012-06-01")) and not s.contains(day_of("2013-01-01"))
    with pytest.raises(ValueError, match="before start"):
        TimeSpan(5, 4)


def test_as_day_accepts_several_forms_and_names_bad_input() -> None:
    assert as_day("1970-01-02") == 1
    assert as_day(dt.date(1970, 1, 3)) == 2
    assert as_day(7.9) == 7
    with pytest.raises(ValueError, match="'March 3'"):
        as_day("March 3")
    with pytest.raises(TypeError, match="None"):
        as_day(None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "question, mode",
    [
        ("When did Ana move to Lisbon?", QueryMode.TIME_SEEKING),
        ("what year did Ana start working as a nurse?", QueryMode.TIME_SEEKING),
        ("In which month did she switch to tea?", QueryMode.TIME_SEEKING),
        ("How long ago did he move?", QueryMode.TIME_SEEKING),
        ("When in 2012 did she move?", QueryMode.TIME_SEEKING),  # asking for a time wins
        ("Where did Ana live in March 2012?", QueryMode.EXPLICIT),
        ("What did Ana drink two years ago?", QueryMode.EXPLICIT),
        ("Where does Ana live now?", QueryMode.TIME_AGNOSTIC),
        ("Where did Ana live when we first talked?", QueryMode.TIME_AGNOSTIC),  # "when" as conjunction
    ],
)
def test_query_modes(question: str, mode: QueryMode) -> None:
    q = query_mode(question, REF)
    assert q.mode == mode
    assert (q.span is not None) == (mode == QueryMode.EXPLICIT)


def test_explicit_mode_carries_the_span() -> None:
    q = query_mode("Where did Ana live in March 2012?", REF)
    assert str(q.span) == "2012-03-01..2012-03-31"
