"""What the TEM store takes in and gives back: sessions, facts, records, passages, errors."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Fact = tuple[str, str, str]
PASSAGE_KINDS = ("turn", "summary")


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

    @classmethod
    def coerce(cls, value: Session | Mapping[str, Any]) -> Session:
        """A ``Session`` from itself or from a mapping with the same keys."""
        if isinstance(value, Session):
            return value
        if isinstance(value, Mapping):
            return cls(**value)
        raise TypeError(f"a session must be a Session or a mapping, got {type(value).__name__}")


@dataclass(frozen=True)
class Record:
    """One stored fact version.

    ``historical``: a later session of the same version group ``(subject, relation)`` holds a
    value (TEM's status, recomputed at every write). ``score``: weighted similarity to the
    question (``cosine · relation weight``) for retrieved records, ``None`` when listed.
    ``span``: ``(start, end)`` character offsets of the object in the session text, ``None`` when
    the session had no text. ``created_at``: Unix seconds (UTC) of the write. ``sources``: ids of
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
class DroppedFact:
    """A fact that was not written, and why (``reason`` names the check that failed)."""

    fact: Fact
    reason: str


@dataclass(frozen=True)
class SessionResult:
    """What ``add_session`` wrote: the session's index, the new record ids, the dropped facts."""

    session_id: str
    session_index: int
    record_ids: list[int] = field(default_factory=list)
    passage_ids: list[int] = field(default_factory=list)
    dropped: list[DroppedFact] = field(default_factory=list)


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


def check_session_id(session_id: Any) -> str:
    """A non-empty string session id, or a ValueError naming it."""
    if not isinstance(session_id, str) or not session_id.strip():
        raise ValueError(f"session_id must be a non-empty string, got {session_id!r}")
    return session_id
