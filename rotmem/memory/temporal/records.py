"""What the temporal layer hands out: a question (``Query``), a timed fact (``TemporalFact``), a
re-ranked record (``TemporalRecord``), and the dated evidence text (``render_timed``). Days are
days since 1970-01-01."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rotmem.data import date_of
from rotmem.memory.records import Record
from rotmem.memory.render import render as render_items

Day = int | float | str


@dataclass(frozen=True)
class Query:
    """One question for ``TemporalMemory.retrieve_many``: top ``k``, asked on day ``now``
    (None: the latest session date)."""

    question: str
    k: int = 15
    now: Day | None = None


@dataclass(frozen=True)
class TemporalFact:
    """One stored fact with its times (days since 1970-01-01) and source session."""

    record_id: int
    head: str
    relation: str
    tail: str
    t_happen: float
    t_obs: float
    source: str


@dataclass(frozen=True)
class TemporalRecord:
    """A retrieved record with its times and the two streams of its score.

    ``tau`` is the day RoMem scored it at (None when it was not scored); ``score`` is ``S_final``.
    """

    record: Record
    t_happen: float | None
    t_obs: float | None
    s_sem: float
    s_kge: float
    score: float
    tau: float | None


def render_timed(records: Iterable[TemporalRecord], show_dates: bool = True) -> str:
    """TEM evidence lines (``[historical]`` labels, no session prefix), each prefixed with the
    day the fact happened (``2019-03-02:``) when ``show_dates`` and the time is known."""
    lines = []
    for item in records:
        line = render_items([item.record], show_session=False)
        if show_dates and item.t_happen is not None:
            line = f"{date_of(item.t_happen)}: {line}"
        lines.append(line)
    return "\n".join(lines)
