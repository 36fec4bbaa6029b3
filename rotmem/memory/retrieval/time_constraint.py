"""The time constraint a question states, read with ``rotmem.memory.temporal.time_expressions``.

A :class:`TimeConstraint` says which facts the question can be about and in what order to read them:

- ``window``: the days ``(lo, hi)`` (inclusive, either end may be infinite) a fact must lie in:
  "in May 2012", "during 2012", "on 3 May 2012" -> that span; "before <date>" (also "prior to",
  "until", "till", "earlier than") -> everything before its first day; "after <date>" ("later
  than") -> everything after its last day; "since <date>" -> from its first day on; "as of
  <date>" ("as at", "by") -> everything up to its last day; "now", "currently", "these days",
  "nowadays", "at present", "at the moment" (no date) -> everything up to the day it is asked;
- ``order``: ``"earliest"`` or ``"latest"`` first, or None (the score decides): "first" /
  "earliest" -> earliest; "last" / "latest" / "most recent" -> latest (not the "last" of "last
  year", which is part of a date); otherwise "before" and "as of" / "now" read the latest first
  (the version valid at the asked time), "after" / "since" the earliest first;
- ``seeks``: the unit a time-seeking question asks for ("In which month ..." -> ``"month"``,
  "What year" -> ``"year"``, "When" -> ``"day"``), None when it asks for no time;
- ``anchor``: an event named in place of a date, resolved against the memory by the caller:
  "After A, who was the first to ..." (``anchor_kind`` ``"after"``: A's first such fact is the
  day), "Before A, ..." (``"before"``), "... in the same month as A praised B" (``"same_month"``,
  likewise ``"same_day"`` / ``"same_year"``: the anchor event's day, widened to that period).
  ``main``: the question without the anchor's words (what the asked facts must match).

``parse_time_constraint(question, now)`` never raises on text: a question with no constraint gets
``TimeConstraint()`` (``bool(...)`` is False).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rotmem.memory.temporal.time_expressions import TimeSpan, as_day, find_times

Window = tuple[float, float]
EVER: Window = (-math.inf, math.inf)

_BEFORE = re.compile(r"\b(?:before|prior\s+to|until|till|earlier\s+than)\s*$", re.IGNORECASE)
_AFTER = re.compile(r"\b(?:after|later\s+than)\s*$", re.IGNORECASE)
_SINCE = re.compile(r"\bsince\s*$", re.IGNORECASE)
_AS_OF = re.compile(r"\b(?:as\s+(?:of|at)|by)\s*$", re.IGNORECASE)
_FIRST = re.compile(r"\b(?:first|earliest)\b", re.IGNORECASE)
_LAST = re.compile(r"\b(?:last|latest|most\s+recent(?:ly)?)\b", re.IGNORECASE)
_CURRENT = re.compile(
    r"\b(?:now|currently|current|these\s+days|nowadays|at\s+present|presently|at\s+the\s+moment)\b",
    re.IGNORECASE,
)
_SEEKS = re.compile(
    r"^\W*(?:(?:in|on|at|during)\s+)?(?:(?P<unit>what|which)\s+(?P<what>year|month|date|day|week)\b"
    r"|(?P<when>when)\b)",
    re.IGNORECASE,
)
_LEADING_ANCHOR = re.compile(r"^\W*(?P<which>after|before)\s+(?P<anchor>[^,?]+?)\s*,\s*", re.IGNORECASE)
_SAME_PERIOD = re.compile(
    r"\s*\b(?:in|on|during)\s+the\s+same\s+(?P<unit>day|month|year)\s+as\s+(?P<anchor>[^?]+?)\s*(?=\?|$)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TimeConstraint:
    """What a question says about time (module docs)."""

    window: Window = EVER
    order: str | None = None
    span: TimeSpan | None = None
    relation: str | None = None  # during / before / after / since / as_of / current
    seeks: str | None = None
    anchor: str | None = None
    anchor_kind: str | None = None  # after / before / same_day / same_month / same_year
    main: str = ""

    def __bool__(self) -> bool:
        return self.window != EVER or self.order is not None or self.anchor is not None

    def keeps(self, day: float | None) -> bool:
        """Whether a fact on ``day`` lies in the window (a fact without a day is never kept out)."""
        return day is None or self.window[0] <= day <= self.window[1]


def _outside(spans: list[TimeSpan], start: int, end: int) -> bool:
    """The characters ``start..end`` are not part of any of the date expressions ``spans``."""
    return all(end <= s.at or start >= s.at + len(s.text) for s in spans)


def _order_word(text: str, spans: list[TimeSpan]) -> str | None:
    for pattern, order in ((_FIRST, "earliest"), (_LAST, "latest")):
        if any(_outside(spans, m.start(), m.end()) for m in pattern.finditer(text)):
            return order
    return None


def _span_window(span: TimeSpan, before: str, now: int) -> tuple[str, Window, str | None]:
    """(relation, window, default order) of a date preceded by the words ``before``."""
    if _BEFORE.search(before):
        return "before", (-math.inf, span.start - 1), "latest"
    if _AFTER.search(before):
        return "after", (span.end + 1, math.inf), "earliest"
    if _SINCE.search(before):
        return "since", (span.start, math.inf), "earliest"
    if _AS_OF.search(before):
        return "as_of", (-math.inf, span.end), "latest"
    return "during", (span.start, span.end), None


def parse_time_constraint(question: str, now: int | float | str) -> TimeConstraint:
    """The constraint of ``question`` asked on day ``now`` (days, or ``"YYYY-MM-DD"``; module docs)."""
    if not isinstance(question, str):
        raise TypeError(f"question must be a string, got {type(question).__name__}")
    today = as_day(now)
    text, anchor, anchor_kind = question, None, None
    lead = _LEADING_ANCHOR.match(text)
    if lead and not find_times(lead.group("anchor"), today):  # "After May 2012, ..." is a date
        anchor, anchor_kind = lead.group("anchor").strip(), lead.group("which").lower()
        text = text[: lead.start()] + text[lead.end() :]
    same = _SAME_PERIOD.search(text)
    if same:
        anchor, anchor_kind = same.group("anchor").strip(), f"same_{same.group('unit').lower()}"
        text = text[: same.start()] + text[same.end() :]
    seeking = _SEEKS.match(text)
    seeks = None
    if seeking:
        seeks = "day" if seeking.group("when") else seeking.group("what").lower().replace("date", "day")
    spans = find_times(text, today)
    order = _order_word(text, spans)
    if anchor is not None:
        default = {"after": "earliest", "before": "latest"}.get(anchor_kind)
        return TimeConstraint(order=order or default, seeks=seeks, anchor=anchor, anchor_kind=anchor_kind,
                              main=text.strip())  # fmt: skip
    if spans:
        span = spans[0]
        relation, window, default = _span_window(span, text[: span.at], today)
        return TimeConstraint(window, order or default, span, relation, seeks, main=text.strip())
    if _CURRENT.search(text):
        return TimeConstraint(
            (-math.inf, today), order or "latest", None, "current", seeks, main=text.strip()
        )
    return TimeConstraint(order=order, seeks=seeks, main=text.strip())
