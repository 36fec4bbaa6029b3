"""Whether a question asks about the past, and the order TEM's versions are presented in.

A question asks about the past when it names a time that ended before the day it is asked ("in May
2023", "last year") or uses a past form ("did", "was", "used to", "lived", "previously", ...).
Otherwise it asks about the present, and the current version of a fact answers it.

``present_order`` puts the retrieved records in the order the reader sees them. Version groups
(subject, relation) keep the source order of their first retrieved version; within a group:

- for a question naming a past time: the versions valid during that time first (a version is valid
  from its ``t_happen`` until the next version of its group happened), then the others in source
  order;
- for another question about the past: source order (the history as it was told);
- for a question about the present: the current version first, then the ``[historical]`` ones,
  newest first.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from rotmem.memory.records import Record

PAST_FORMS = re.compile(
    r"\b(?:did|didn't|was|wasn't|were|weren't|had|hadn't|used\s+to|previously|formerly|originally|"
    r"ago|back\s+then|in\s+the\s+past|earlier|before|lived|moved|worked|studied|went|left|stayed|"
    r"visited|married|liked|owned|played|attended|joined)\b",
    re.IGNORECASE,
)


class Timed(Protocol):
    record: Record
    t_happen: float | None


T = TypeVar("T", bound=Timed | Record)


def _record(item: Timed | Record) -> Record:
    return item if isinstance(item, Record) else item.record


def _happened(item: Timed | Record) -> float | None:
    return None if isinstance(item, Record) else item.t_happen


def asks_about_past(question: str, span: Any = None, now: float | None = None) -> bool:
    """True when ``question`` uses a past form, or names a time ``span`` (``start``/``end`` days,
    inclusive) that ended before ``now``."""
    if span is not None and now is not None and span.end < now:
        return True
    return PAST_FORMS.search(question) is not None


def source_order(item: Timed | Record) -> tuple[int, int]:
    record = _record(item)
    return record.session_index, record.id


def valid_during(
    items: Sequence[Timed | Record], start: float, end: float, group: Callable[[Record], str]
) -> set[int]:
    """Positions in ``items`` of the versions valid at some day of ``start..end``: a version holds
    from its ``t_happen`` until the next ``t_happen`` in its group (among ``items``)."""
    groups: dict[str, list[int]] = defaultdict(list)
    for position, item in enumerate(items):
        if _happened(item) is not None:
            groups[group(_record(item))].append(position)
    valid = set()
    for positions in groups.values():
        positions.sort(key=lambda p: (_happened(items[p]), *source_order(items[p])))
        for this, after in zip(positions, [*positions[1:], None], strict=True):
            begins = _happened(items[this])
            ends = None if after is None else _happened(items[after])
            if begins <= end and (ends is None or ends > start):
                valid.add(this)
    return valid


def present_order(
    items: Sequence[T], question: str, span: Any, now: float | None, group: Callable[[Record], str]
) -> list[T]:
    """``items`` (records, or items with ``record`` and ``t_happen``) in the order described in the
    module docs; ``span`` is the time the question names (None when it names none or nothing is
    timed), ``now`` the day it is asked, ``group`` a record's version group."""
    in_source_order = sorted(range(len(items)), key=lambda p: source_order(items[p]))
    past_time = span is not None and now is not None and span.end < now
    if not past_time and asks_about_past(question, span, now):
        return [items[p] for p in in_source_order]
    first: dict[str, int] = {}
    for rank, p in enumerate(in_source_order):
        first.setdefault(group(_record(items[p])), rank)
    valid = valid_during(items, span.start, span.end, group) if past_time else set()

    def key(p: int) -> tuple:
        record = _record(items[p])
        where = first[group(record)]
        if past_time:
            return (where, p not in valid, record.session_index, record.id)
        return (where, record.historical, -record.session_index, -record.id)

    return [items[p] for p in sorted(range(len(items)), key=key)]
