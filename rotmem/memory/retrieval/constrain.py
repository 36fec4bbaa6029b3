"""A question's time constraint applied to scored candidates: filter by its window, order by date.

Candidates come best score first (the hybrid's, or the hybrid's plus RoMem's). With a constraint
(``time_constraint.parse_time_constraint``):

1. *Window*: candidates dated outside it go to the end (by score), so that ``k`` results stay
   ``k`` when the memory has them; candidates without a day are never moved out.
2. *Asked slot* ``(relation, named subject, named object)`` of ``constraint.main``, read from the
   kept candidates (``slots.asked_slot``: the relation the question names, the entities' roles,
   then a reciprocal-rank vote); the kept candidates of that slot are the *tier*.
   Sorting every kept candidate by date would put the pool's earliest fact first, whatever it is
   about; sorting the tier puts the slot's.
3. *Order*: the tier's dated candidates earliest (or latest) first, ties by score; then the other
   kept candidates (and the tier's undated ones) by score; with no order word, the tier and the
   rest by score (the window did the work).
4. *Anchors*: ``"after"`` / ``"before"`` an entity ("After A, who was the first to visit X?"): A's
   first day among the tier's facts naming A is the anchor; the window is the days after (before)
   it and A's own facts leave the tier. ``"same_day|month|year"``: the caller resolves the event to
   a day (``anchor_day``) and the window is that period.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from rotmem.memory.records import Record
from rotmem.memory.retrieval.slots import Naming, Slot, asked_slot
from rotmem.memory.retrieval.time_constraint import TimeConstraint, Window

_EPOCH = dt.date(1970, 1, 1).toordinal()


@dataclass(frozen=True)
class Candidate:
    """A record, the day it happened (None: undated) and its retrieval score."""

    record: Record
    day: float | None
    score: float


def period(day: float, unit: str) -> Window:
    """The whole ``day`` / ``month`` / ``year`` holding ``day`` (days since 1970-01-01)."""
    d = math.floor(day)
    if unit == "day":
        return float(d), float(d)
    date = dt.date.fromordinal(d + _EPOCH)
    if unit == "month":
        first = date.replace(day=1).toordinal() - _EPOCH
        return float(first), float(first + calendar.monthrange(date.year, date.month)[1] - 1)
    if unit == "year":
        return float(dt.date(date.year, 1, 1).toordinal() - _EPOCH), float(
            dt.date(date.year, 12, 31).toordinal() - _EPOCH
        )
    raise ValueError(f"unit must be day, month or year, got {unit!r}")


def _names(name: str, text: str) -> bool:
    return bool(name) and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def _window(constraint: TimeConstraint, anchor_day: float | None) -> Window:
    if constraint.anchor is None or anchor_day is None:
        return constraint.window
    if constraint.anchor_kind == "after":
        return math.floor(anchor_day) + 1, math.inf
    if constraint.anchor_kind == "before":
        return -math.inf, math.ceil(anchor_day) - 1
    return period(anchor_day, constraint.anchor_kind.removeprefix("same_"))


def apply_constraint(
    candidates: Sequence[Candidate],
    constraint: TimeConstraint,
    anchor_day: float | None = None,
    complete: Callable[[Slot], Sequence[Candidate]] | None = None,
    similarity: Callable[[str], float] | None = None,
) -> list[Candidate]:
    """``candidates`` (any order) in the constraint's order (module docs); by score when it has none.
    ``complete(slot)``: more facts of the asked slot than the candidates hold (e.g. all the
    memory's), added before the slot's facts are filtered and ordered (step 5). ``similarity(relation)``:
    how close a relation is to the question (``slots.asked_slot``)."""
    by_score = sorted(candidates, key=lambda c: -c.score)
    if not constraint:
        return by_score
    text = constraint.main
    entity_anchor = constraint.anchor if constraint.anchor_kind in ("after", "before") else None

    def names_anchor(c: Candidate) -> bool:
        return _names(c.record.subject, entity_anchor) or _names(c.record.object, entity_anchor)

    # A's own facts: the anchor, not answers (the slot is X's)
    anchors = {id(c) for c in by_score if names_anchor(c)} if entity_anchor is not None else set()
    naming = Naming(text, (n for c in by_score for n in (c.record.subject, c.record.object)))
    pool = [c.record for c in by_score if id(c) not in anchors and constraint.keeps(c.day)]
    key = asked_slot(pool, naming, similarity)
    if complete is not None and key is not None and any(key[1:]):
        held = {c.record.id for c in by_score}
        added = [c for c in complete(key) if c.record.id not in held]
        by_score += added
        naming.add(n for c in added for n in (c.record.subject, c.record.object))
        if entity_anchor is not None:
            anchors |= {id(c) for c in added if names_anchor(c)}
    in_slot = (
        []
        if key is None
        else [c for c in by_score if c.record.relation == key[0] and naming.slot(c.record) == key]
    )
    if entity_anchor is not None:
        days = [c.day for c in in_slot if id(c) in anchors and c.day is not None]
        anchor_day = min(days) if days else None
    window = _window(constraint, anchor_day)
    kept = replace(constraint, window=window)
    inside: list[Candidate] = []
    outside: list[Candidate] = []
    for c in by_score:
        (inside if kept.keeps(c.day) else outside).append(c)
    tier = [c for c in in_slot if c.day is not None and kept.keeps(c.day) and id(c) not in anchors]
    if constraint.order is not None:
        sign = 1.0 if constraint.order == "earliest" else -1.0
        tier.sort(key=lambda c: (sign * c.day, -c.score))
    tier_ids = {id(c) for c in tier}
    return tier + [c for c in inside if id(c) not in tier_ids] + outside
