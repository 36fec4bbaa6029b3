"""What the TEM store takes in and gives back: sessions, facts, records, passages, errors.

``Session.validate`` is the one place a session is checked before it is written: ids, facts, texts,
turns, the session index (a signed 63-bit integer) and every day (``date``, ``t_happen``: days since
1970-01-01 or ``"YYYY-MM-DD"``, finite and inside the calendar, 0001-01-01 .. 9999-12-31). A bad
value raises a ``ValueError`` naming the session and the fact.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

Fact = tuple[str, str, str]
Day = int | float | str | dt.date
PASSAGE_KINDS = ("turn", "summary")
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
MIN_DAY = dt.date.min.toordinal() - _EPOCH_ORDINAL  # 0001-01-01
MAX_DAY = dt.date.max.toordinal() - _EPOCH_ORDINAL  # 9999-12-31
MAX_SESSION_INDEX = 2**63 - 2  # SQLite and Postgres BIGINT; one more must still fit (the next index)


class DuplicateSessionError(ValueError):
    """A session id that the store already holds (or that repeats within one batch)."""


@dataclass(frozen=True)
class ExtractedFact:
    """A fact to write, as an extractor (``rotmem.memory.llm.FactExtractor``) returns it.

    ``t_happen``: when it became true (a day number since 1970-01-01, ``"YYYY-MM-DD"``, or None:
    read from the session text); only ``TemporalMemory`` keeps it. ``sources``: ids of the
    dialogue turns it was extracted from (provenance; e.g. LoCoMo's ``"D1:3"``).
    """

    subject: str
    relation: str
    object: str
    t_happen: int | float | str | None = None
    sources: tuple[str, ...] = ()

    @property
    def triple(self) -> Fact:
        return self.subject, self.relation, self.object


@dataclass(frozen=True)
class Session:
    """One session to ingest (see ``TEMStore.add_session`` for the meaning of each field)."""

    session_id: str
    facts: Sequence[Sequence[str] | ExtractedFact] = ()
    text: str | None = None
    session_index: int | None = None
    turns: Sequence[str] | None = None
    summaries: Sequence[str] = ()
    turn_ids: Sequence[str] | None = None
    date: Day | None = None

    @classmethod
    def coerce(cls, value: Session | Mapping[str, Any]) -> Session:
        """A ``Session`` from itself or from a mapping with the same keys."""
        if isinstance(value, Session):
            return value
        if isinstance(value, Mapping):
            unknown = sorted(set(value) - set(cls.__dataclass_fields__))
            if unknown:
                raise ValueError(f"session {value.get('session_id')!r}: unknown field(s) {unknown}")
            return cls(**value)
        raise TypeError(f"a session must be a Session or a mapping, got {type(value).__name__}")

    def validate(self, timed: bool = False) -> ValidSession:
        """The session checked and normalised for writing (see the module docs).

        ``timed``: facts may also be ``(subject, relation, object, t_happen)`` and ``date`` is
        required (``TemporalMemory``); otherwise a 4-tuple is malformed and ``date`` optional.
        Turns default to the non-empty lines of ``text``.
        """
        session_id = check_session_id(self.session_id)
        where = f"session {session_id!r}"
        index = self.session_index
        if index is not None:
            if isinstance(index, bool) or not hasattr(index, "__index__"):
                raise ValueError(f"{where}: session_index must be an int or None, got {index!r}")
            if not 0 <= int(index) <= MAX_SESSION_INDEX:
                raise ValueError(f"{where}: session_index must be in 0..{MAX_SESSION_INDEX}, got {index!r}")
            index = int(index)
        if self.text is not None and not isinstance(self.text, str):
            raise ValueError(f"{where}: text must be a string or None, got {type(self.text).__name__}")
        if timed and self.date is None:
            raise ValueError(f"{where}: a date is required")
        date = None if self.date is None else check_day(self.date, where, "date")
        if isinstance(self.facts, str | bytes) or not isinstance(self.facts, Sequence):
            raise ValueError(f"{where}: facts must be a sequence of (subject, relation, object)")
        facts = tuple(check_new_fact(fact, f"{where}, fact {i}", timed) for i, fact in enumerate(self.facts))
        return ValidSession(session_id, facts, self.text, index, self._passages(where), date)

    def _passages(self, where: str) -> tuple[NewPassage, ...]:
        turns = self.turns
        if turns is None:
            turns = [line.strip() for line in (self.text or "").splitlines() if line.strip()]
        if isinstance(turns, str) or not isinstance(turns, Sequence):
            raise ValueError(f"{where}: turns must be a sequence of strings")
        turn_ids: list[tuple[str, ...]] = [()] * len(turns)
        if self.turn_ids is not None:
            if len(self.turn_ids) != len(turns):
                raise ValueError(f"{where}: {len(self.turn_ids)} turn_ids for {len(turns)} turns")
            turn_ids = [check_sources((t,), f"{where}, turn_ids") for t in self.turn_ids]
        summaries = [self.summaries] if isinstance(self.summaries, str) else list(self.summaries)
        passages = [NewPassage("turn", t, i) for t, i in zip(turns, turn_ids, strict=True)]
        passages += [NewPassage("summary", s, ()) for s in summaries]
        for passage in passages:
            if not isinstance(passage.text, str) or not passage.text.strip():
                raise ValueError(
                    f"{where}: every {passage.kind} must be a non-empty string, got {passage.text!r}"
                )
        return tuple(passages)


class NewFact(NamedTuple):
    """A checked fact to write: stripped strings, its source ids, its ``t_happen`` day if given."""

    subject: str
    relation: str
    object: str
    sources: tuple[str, ...] = ()
    t_happen: float | None = None

    @property
    def triple(self) -> Fact:
        return self.subject, self.relation, self.object


class NewPassage(NamedTuple):
    """A checked side-store passage to write (``kind`` in ``PASSAGE_KINDS``)."""

    kind: str
    text: str
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class ValidSession:
    """A session as ``Session.validate`` returns it; ``date`` in days, None when not given."""

    session_id: str
    facts: tuple[NewFact, ...]
    text: str | None
    session_index: int | None
    passages: tuple[NewPassage, ...]
    date: float | None = None


@dataclass(frozen=True)
class Record:
    """One stored fact version.

    ``historical``: a later session of the same version group ``(subject, relation)`` holds a
    value (TEM's status, recomputed at every write). ``score``: weighted similarity to the
    question (``cosine · relation weight``) for retrieved records, ``None`` when listed.
    ``span``: ``(start, end)`` character offsets of the object in the session text, ``None`` when
    the object was not found there, the session had no text or the store does not check
    (``verified``). ``created_at``: Unix seconds (UTC) of the write. ``sources``: ids of
    the dialogue turns the fact was extracted from (empty when not given).
    """

    subject: str
    relation: str
    object: str
    session_id: str
    session_index: int
    historical: bool
    score: float | None = None
    id: int = -1
    relation_type: str | None = None
    weight: float = 1.0
    span: tuple[int, int] | None = None
    created_at: float = 0.0
    sources: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        """The object was found in the session text (the fact has a ``span``)."""
        return self.span is not None


@dataclass(frozen=True)
class Passage:
    """A dialogue turn (``kind="turn"``) or event summary (``kind="summary"``) from the side store.

    ``position``: order within its session (0-based); ``sources``: a turn's own dialogue id when
    given; ``score``: cosine similarity to the question when retrieved, ``None`` when listed.
    """

    kind: str
    text: str
    session_id: str
    session_index: int
    position: int
    sources: tuple[str, ...] = ()
    score: float | None = None
    id: int = -1


@dataclass(frozen=True)
class SessionResult:
    """What ``add_session`` wrote: the session's index, the new record ids and passage ids.

    Every input fact is stored. ``fact_ids``: the record id of each input fact, in input order
    (``record_ids`` is the same list). ``verified``: per input fact, whether its object was found in
    the session text (False: not found, no text, or a store that does not check).
    """

    session_id: str
    session_index: int
    record_ids: list[int] = field(default_factory=list)
    passage_ids: list[int] = field(default_factory=list)
    fact_ids: list[int] = field(default_factory=list)
    verified: list[bool] = field(default_factory=list)


def check_sources(sources: Any, where: str) -> tuple[str, ...]:
    """Source ids as a tuple of non-empty strings, or a ValueError naming them."""
    if isinstance(sources, str):
        sources = (sources,)
    if not isinstance(sources, Sequence) or not all(isinstance(s, str) and s.strip() for s in sources):
        raise ValueError(f"{where}: sources must be non-empty strings, got {sources!r}")
    return tuple(s.strip() for s in sources)


def check_fact(fact: Any, where: str) -> Fact:
    """``fact`` (a triple or an ``ExtractedFact``) as ``(subject, relation, object)`` stripped
    strings, or a ValueError naming it."""
    if isinstance(fact, ExtractedFact):
        fact = fact.triple
    if isinstance(fact, str | bytes) or not isinstance(fact, Sequence) or len(fact) != 3:
        raise ValueError(f"{where}: a fact must be (subject, relation, object), got {fact!r}")
    subject, relation, obj = fact
    if not (isinstance(subject, str) and isinstance(relation, str) and isinstance(obj, str)):
        raise ValueError(f"{where}: subject, relation and object must be non-empty strings, got {fact!r}")
    subject, relation, obj = subject.strip(), relation.strip(), obj.strip()
    if not (subject and relation and obj):
        raise ValueError(f"{where}: subject, relation and object must be non-empty strings, got {fact!r}")
    return subject, relation, obj


def check_new_fact(fact: Any, where: str, timed: bool = False) -> NewFact:
    """A triple, an ``ExtractedFact`` or (``timed``) a ``(subject, relation, object, t_happen)``
    as a ``NewFact``, or a ValueError naming ``where``."""
    if isinstance(fact, ExtractedFact):
        when = None if fact.t_happen is None else check_day(fact.t_happen, where, "t_happen")
        return NewFact(*check_fact(fact.triple, where), check_sources(fact.sources, where), when)
    if timed and isinstance(fact, Sequence) and not isinstance(fact, str | bytes):
        if len(fact) not in (3, 4):
            raise ValueError(
                f"{where}: expected (subject, relation, object) or (subject, relation, object, t_happen), "
                f"got {fact!r}"
            )
        when = fact[3] if len(fact) == 4 else None
        return NewFact(
            *check_fact(tuple(fact[:3]), where),
            (),
            None if when is None else check_day(when, where, "t_happen"),
        )
    return NewFact(*check_fact(fact, where))


def check_day(value: Any, where: str, what: str = "day") -> float:
    """A day (days since 1970-01-01 as a number, ``"YYYY-MM-DD"`` or a ``datetime.date``) as float
    days inside the calendar, or a ValueError naming ``where``, ``what`` and the value."""
    if isinstance(value, dt.datetime):
        value = value.date()
    if isinstance(value, dt.date):
        return float(value.toordinal() - _EPOCH_ORDINAL)
    if isinstance(value, str):
        try:
            return float(dt.date.fromisoformat(value.strip()).toordinal() - _EPOCH_ORDINAL)
        except ValueError:
            raise ValueError(f"{where}: bad {what} {value!r}, expected YYYY-MM-DD") from None
    if isinstance(value, bool) or not (isinstance(value, int | float) or hasattr(value, "__float__")):
        raise ValueError(f"{where}: bad {what} {value!r}, expected days since 1970-01-01 or YYYY-MM-DD")
    day = float(value)
    if not math.isfinite(day):
        raise ValueError(f"{where}: {what} must be finite, got {value!r}")
    if not MIN_DAY <= day < MAX_DAY + 1:
        raise ValueError(
            f"{where}: {what} {value!r} is outside the calendar (0001-01-01 .. 9999-12-31 is days "
            f"{MIN_DAY} .. {MAX_DAY} since 1970-01-01; a date is written 'YYYY-MM-DD')"
        )
    return day


def check_session_id(session_id: Any) -> str:
    """A non-empty string session id, or a ValueError naming it."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
    return session_id


def check_question(question: Any) -> None:
    """A ``ValueError`` unless ``question`` is a non-empty string."""
    if not isinstance(question, str) or not question.strip():
        raise ValueError(f"question must be a non-empty string, got {question!r}")
