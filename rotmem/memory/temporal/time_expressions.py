"""Rule-based time expressions and query modes, resolved against a reference day.

Days are integers: days since 1970-01-01 (UTC), the same numbers as ``TemporalKG``'s ``day`` column
and RoMem's ``tau``. A resolved expression is a :class:`TimeSpan` of whole days, ``start <= end``
(both inclusive): a single day has ``start == end``.

Recognised (case-insensitive; the leftmost, longest match wins where expressions overlap):

- calendar dates: ``2011-05-03``, ``3 May 2011``, ``3rd of May, 2011``, ``May 3, 2011`` (a day);
  ``May 2011``, ``May of 2011`` (that month); ``in 2012``, a bare year 1900-2099 (that year;
  not digits inside a URL or file name, nor a far-future year without a preposition, a name such
  as "Cyberpunk 2077");
- ``today``, ``yesterday``, ``the day before yesterday``, ``tomorrow`` (a day);
- ``N days|weeks|months|years ago`` and ``in N days|weeks|months|years`` (a day, N counted back or
  forward in calendar units), with N a numeral, ``a``/``an``, ``one`` .. ``twenty``,
  ``a couple of`` (2) or ``a few`` (3);
- ``last|this|next week|month|year`` (the calendar week Monday-Sunday, month or year);
- ``last|this|next <month name>``: ``last March`` is the latest March that ended before the
  reference month, ``next March`` the first March after it, ``this March`` March of the reference year;
- ``in <month name>`` without a year: the latest such month not after the reference month (memory
  questions look back);
- ``last|this|next <weekday>``: ``last Monday`` is the latest Monday strictly before the reference
  day, ``next Monday`` the first one strictly after it, ``this Monday`` the one in the reference week.

A calendar date that does not exist (``Feb 30, 2012``) is not a day; the year inside it is still
read. ``may`` names the month in ``last May`` / ``in May`` only when capitalised (else it is a verb).

``happened_day`` dates a fact told on a day from the sentence of the session text that holds its
object ("I moved to Porto two months ago" -> two months before the session; an interval such as
"last year" -> its middle day).

Query modes (ROMEM.md, "Query time"): *time-seeking* when the question asks for a time ("When did
...", "What year ...", "In which month ...", "How long ago ..."; this wins over a date in the same
question), *explicit* when it names a time, *time-agnostic* otherwise.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum

from rotmem.data.temporal_kg import date_of, day_of
from rotmem.memory.tem.verification import object_span

_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()

MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sept", "sep"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
WEEKDAYS = {
    name: i
    for i, name in enumerate(["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])
}
NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "a couple of": 2,
    "a few": 3,
}

# Longest alternatives first so that "sept" is not read as "sep" + "t".
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
_MONTH_FULL = "|".join(name for name in MONTHS if len(name) > 4 or name in ("may", "june", "july"))
_WEEKDAY = "|".join(WEEKDAYS)
_COUNT = r"\d{1,3}|" + "|".join(sorted((re.escape(w) for w in NUMBER_WORDS), key=len, reverse=True))
_UNIT = r"day|week|month|year"
_YEAR = r"(?:19|20)\d{2}"
_ORD = r"(?:st|nd|rd|th)?"


def _ci(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", _ci(rf"\b(?P<y>{_YEAR})-(?P<m>\d{{1,2}})-(?P<d>\d{{1,2}})\b")),
    (
        "day_month_year",
        _ci(rf"\b(?P<d>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<month>{_MONTH})\.?,?\s+(?P<y>{_YEAR})\b"),
    ),
    (
        "month_day_year",
        _ci(rf"\b(?P<month>{_MONTH})\.?\s+(?P<d>\d{{1,2}}){_ORD},?\s+(?P<y>{_YEAR})\b"),
    ),
    ("month_year", _ci(rf"\b(?P<month>{_MONTH})\.?,?\s+(?:of\s+)?(?P<y>{_YEAR})\b")),
    ("day_before_yesterday", _ci(r"\bthe\s+day\s+before\s+yesterday\b")),
    ("deictic", _ci(r"\b(?P<word>today|tonight|yesterday|tomorrow)\b")),
    ("ago", _ci(rf"\b(?P<n>{_COUNT})\s+(?P<unit>{_UNIT})s?\s+ago\b")),
    ("in_count", _ci(rf"\bin\s+(?P<n>{_COUNT})\s+(?P<unit>{_UNIT})s?\b")),
    ("rel_unit", _ci(r"\b(?P<which>last|this|next)\s+(?P<unit>week|month|year)\b")),
    ("rel_month", _ci(rf"\b(?P<which>last|this|next)\s+(?P<month>{_MONTH_FULL})\b")),
    ("rel_weekday", _ci(rf"\b(?P<which>last|this|next)\s+(?P<weekday>{_WEEKDAY})\b")),
    ("in_month", _ci(rf"\bin\s+(?P<month>{_MONTH_FULL})\b(?!\.?,?\s*(?:of\s+)?\d)")),
    ("year", _ci(rf"\b(?P<y>{_YEAR})\b")),
]

_SENTENCE_END = re.compile(r"[.!?;\n]")
_TIME_SEEKING = re.compile(
    r"^\W*(?:(?:and|so|but|then)\s+)?"
    r"(?:when\b|since\s+when\b|how\s+long\s+ago\b"
    r"|(?:(?:in|on|at|during)\s+)?(?:what|which)\s+(?:year|month|date|day|week|time)\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TimeSpan:
    """Whole days ``start..end`` (inclusive; days since 1970-01-01), the words they came from and
    where those words start in the text (``find_times``; not part of equality)."""

    start: int
    end: int
    text: str = ""
    at: int = field(default=-1, compare=False)  # offset of ``text`` in the searched string (-1: unknown)

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"TimeSpan end {self.end} is before start {self.start}")

    @property
    def midpoint(self) -> float:
        """The middle of the span in days (the query time RoMem scores an explicit span at)."""
        return (self.start + self.end) / 2.0

    @property
    def is_day(self) -> bool:
        return self.start == self.end

    def contains(self, day: float) -> bool:
        return self.start <= day <= self.end

    def __str__(self) -> str:
        if self.is_day:
            return date_of(self.start)
        return f"{date_of(self.start)}..{date_of(self.end)}"


class QueryMode(StrEnum):
    """How a question relates to time (ROMEM.md, "Query time")."""

    EXPLICIT = "explicit"
    TIME_SEEKING = "time-seeking"
    TIME_AGNOSTIC = "time-agnostic"


@dataclass(frozen=True)
class TimeQuery:
    """The mode of a question and, for ``EXPLICIT``, the time it names."""

    mode: QueryMode
    span: TimeSpan | None = None


def as_day(value: int | float | str | dt.date) -> int:
    """A day number from an int/float day, a ``"YYYY-MM-DD"`` string or a ``datetime.date``."""
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return value.toordinal() - _EPOCH_ORDINAL
    if isinstance(value, str):
        try:
            return day_of(value)
        except ValueError:
            raise ValueError(f"bad date {value!r}, expected YYYY-MM-DD") from None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    raise TypeError(f"expected a day number, 'YYYY-MM-DD' or a date, got {value!r}")


def _date(day: int) -> dt.date:
    return dt.date.fromordinal(day + _EPOCH_ORDINAL)


def _day(date: dt.date) -> int:
    return date.toordinal() - _EPOCH_ORDINAL


def _add_months(date: dt.date, months: int) -> dt.date:
    """``date`` moved by whole calendar months, the day clamped to the target month's length."""
    index = date.year * 12 + date.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    return dt.date(year, month, min(date.day, calendar.monthrange(year, month)[1]))


def _month_span(year: int, month: int) -> tuple[int, int]:
    first = dt.date(year, month, 1)
    return _day(first), _day(first) + calendar.monthrange(year, month)[1] - 1


def _year_span(year: int) -> tuple[int, int]:
    return _day(dt.date(year, 1, 1)), _day(dt.date(year, 12, 31))


def _count(word: str) -> int:
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else NUMBER_WORDS[word]


def _shift(ref: dt.date, n: int, unit: str) -> dt.date:
    if unit == "day":
        return ref + dt.timedelta(days=n)
    if unit == "week":
        return ref + dt.timedelta(weeks=n)
    return _add_months(ref, n * (12 if unit == "year" else 1))


_INSIDE_TOKEN_BEFORE = re.compile(r"[/_=%&#\\]$|\w\.$")
_INSIDE_TOKEN_AFTER = re.compile(r"[/_=%&#\\]|\.\w")  # not "?": a question ends "in 2019?"
_TIME_PREPOSITION = re.compile(
    r"\b(?:in|by|until|till|before|after|since|of|from|during|around|circa|to)\s+$", re.IGNORECASE
)
FUTURE_YEARS = 10  # a bare year further ahead than this, with no preposition, is a name


def _bare_year(m: re.Match[str], ref: dt.date) -> tuple[int, int] | None:
    """A bare year's days, or None where the digits are not a time: inside a URL, file name or
    identifier (``%2034``, ``IMG_2019.jpg``), or a year more than ``FUTURE_YEARS`` ahead of the
    reference with no preposition before it (a name: "Cyberpunk 2077", "Blade Runner 2049")."""
    before, after = m.string[: m.start()], m.string[m.end() :]
    if _INSIDE_TOKEN_BEFORE.search(before) or _INSIDE_TOKEN_AFTER.match(after):
        return None
    year = int(m.group("y"))
    if year > ref.year + FUTURE_YEARS and not _TIME_PREPOSITION.search(before):
        return None
    return _year_span(year)


def _resolve(kind: str, m: re.Match[str], ref: dt.date) -> tuple[int, int] | None:
    """Days ``(start, end)`` of one match, or None when the words name no valid date."""
    g = {k: (v.lower() if isinstance(v, str) else v) for k, v in m.groupdict().items()}
    try:
        if kind in ("iso", "day_month_year", "month_day_year"):
            month = int(g["m"]) if kind == "iso" else MONTHS[g["month"]]
            day = _day(dt.date(int(g["y"]), month, int(g["d"])))
            return day, day
    except ValueError:  # 31 February and the like
        return None
    if kind == "month_year":
        return _month_span(int(g["y"]), MONTHS[g["month"]])
    if kind == "year":
        return _bare_year(m, ref)
    if kind == "day_before_yesterday":
        return _day(ref) - 2, _day(ref) - 2
    if kind == "deictic":
        offset = {"today": 0, "tonight": 0, "yesterday": -1, "tomorrow": 1}[g["word"]]
        return _day(ref) + offset, _day(ref) + offset
    if kind in ("ago", "in_count"):
        n = _count(g["n"]) * (-1 if kind == "ago" else 1)
        day = _day(_shift(ref, n, g["unit"]))
        return day, day
    if kind == "rel_unit":
        step = {"last": -1, "this": 0, "next": 1}[g["which"]]
        if g["unit"] == "week":
            monday = _day(ref) - ref.weekday() + 7 * step
            return monday, monday + 6
        if g["unit"] == "month":
            moved = _add_months(ref.replace(day=1), step)
            return _month_span(moved.year, moved.month)
        return _year_span(ref.year + step)
    if kind in ("rel_month", "in_month") and g["month"] == "may" and not m.group("month")[0].isupper():
        return None  # the verb "may" ("this may take a while"), not the month
    if kind == "rel_month":
        month = MONTHS[g["month"]]
        year = ref.year
        if g["which"] == "last" and month >= ref.month:
            year -= 1
        elif g["which"] == "next" and month <= ref.month:
            year += 1
        return _month_span(year, month)
    if kind == "in_month":
        month = MONTHS[g["month"]]
        return _month_span(ref.year if month <= ref.month else ref.year - 1, month)
    if kind == "rel_weekday":
        target = WEEKDAYS[g["weekday"]]
        if g["which"] == "this":
            day = _day(ref) - ref.weekday() + target
        elif g["which"] == "last":
            day = _day(ref) - ((ref.weekday() - target) % 7 or 7)
        else:
            day = _day(ref) + ((target - ref.weekday()) % 7 or 7)
        return day, day
    raise AssertionError(f"unhandled pattern {kind}")


def find_times(text: str, reference_day: int | str | dt.date) -> list[TimeSpan]:
    """Every time expression in ``text``, left to right, resolved against ``reference_day``.

    Overlapping matches are resolved by keeping the leftmost, then the longest one, so
    ``"3 May 2011"`` is one day, not a day plus a month plus a year.
    """
    ref = _date(as_day(reference_day))
    found: list[tuple[int, int, str, re.Match[str]]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            found.append((m.start(), -(m.end() - m.start()), kind, m))
    found.sort(key=lambda item: (item[0], item[1]))
    spans: list[TimeSpan] = []
    covered_until = -1
    for start, _neg_len, kind, m in found:
        if start < covered_until:
            continue
        days = _resolve(kind, m, ref)
        if days is None:
            continue
        spans.append(TimeSpan(days[0], days[1], text[m.start() : m.end()], m.start()))
        covered_until = m.end()
    return spans


def extract_time(text: str, reference_day: int | str | dt.date) -> TimeSpan | None:
    """The first time expression in ``text`` resolved against ``reference_day``, or None."""
    spans = find_times(text, reference_day)
    return spans[0] if spans else None


def query_mode(question: str, reference_day: int | str | dt.date) -> TimeQuery:
    """Classify ``question`` as time-seeking, explicit (with its span) or time-agnostic."""
    if _TIME_SEEKING.search(question):
        return TimeQuery(QueryMode.TIME_SEEKING)
    span = extract_time(question, reference_day)
    if span is not None:
        return TimeQuery(QueryMode.EXPLICIT, span)
    return TimeQuery(QueryMode.TIME_AGNOSTIC)


def happened_day(obj: str, text: str | None, t_obs: float) -> float:
    """``t_happen`` of a fact told on day ``t_obs`` whose object is ``obj``: the first time
    expression in the sentence of ``text`` holding ``obj``, resolved against ``t_obs`` (its middle
    day, floored, for a span); ``t_obs`` when there is no text, no such sentence or no expression."""
    if not text:
        return float(t_obs)
    span = object_span(obj, text)
    if span is None:
        return float(t_obs)
    start = max((m.end() for m in _SENTENCE_END.finditer(text, 0, span[0])), default=0)
    end_match = _SENTENCE_END.search(text, span[1])
    sentence = text[start : end_match.start() if end_match else len(text)]
    found = extract_time(sentence, int(t_obs))
    return float(t_obs) if found is None else float(math.floor(found.midpoint))
