"""The baselines a memory is compared against, each a ranker over a ``TemporalMemory``'s facts.

A ranker is ``rank(question, vector, now) -> record ids``, best first, at most ``depth``:
``vector`` is the question's embedding ``[D]`` (None: embedded here with the store's encoder), so
a comparison embeds each question once, outside the timed call; ``now`` is the day it is asked on.

- ``dense``: cosine of the store's embeddings (its index, ``cosine x relation weight``), best first;
- ``bm25``: BM25 over the fact sentences ``"subject relation object"`` (``lexical.LexicalIndex``);
- ``symbolic``: what an engineer would write without a model: the dense top ``pool``, filtered by
  the question's time constraint (``rotmem.memory.temporal.time_expressions``; "before"/"after" a
  span cut at its first/last day, any other span keeps facts inside it) and sorted by date for
  "first" (earliest first), "last" and current-state questions ("these days", "now", "nowadays":
  latest first); ties and unsorted questions keep the dense order. It does not resolve event
  anchors ("After A, who was the first ..." is sorted as "first", with no anchor). With
  ``named_first``, the date sort puts the facts that name an entity of the question first;
- ``tem``: TEM's read path (the dense top ``depth``) with its labels applied the way a reader
  would: current versions before ``[historical]`` ones, newest first.

Besides them, the library's own memories as rankers, to compare with the baselines on the same
questions:

- ``hybrid``: ``HybridRetriever``'s top ``depth`` units, their facts in unit order, cut at ``depth``;
- ``temporal``: ``TemporalMemory.retrieve``'s top ``depth``, best ``S_final`` first;
- ``best``: ``BestMemory``'s top ``depth`` (the hybrid pool re-ranked by ``score + beta * S_kge``,
  with ``constrain`` the question's time constraint applied), best first.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from rotmem.memory.retrieval.best import BestMemory
from rotmem.memory.retrieval.hybrid import HybridRetriever
from rotmem.memory.retrieval.lexical import LexicalIndex
from rotmem.memory.tem.store import fact_text
from rotmem.memory.temporal.memory import TemporalMemory
from rotmem.memory.temporal.time_expressions import QueryMode, query_mode

DEPTH = 10
POOL = 50  # the symbolic baseline's dense pool: as many as TemporalMemory re-ranks

Ranker = Callable[[str, "np.ndarray | None", int], list[int]]  # (question, vector, day) -> record ids

_CURRENT = re.compile(r"\b(?:these days|nowadays|now)\b", re.IGNORECASE)
_FIRST = re.compile(r"\bfirst\b", re.IGNORECASE)
_LAST = re.compile(r"\blast\b", re.IGNORECASE)


def by_score(records) -> list[int]:
    """Record ids by descending score (ties: older first, the store's source order)."""
    return [r.id for r in sorted(records, key=lambda r: -(r.score or 0.0))]


def _embedded(memory: TemporalMemory, question: str, vector: np.ndarray | None) -> np.ndarray:
    return memory.store.encode([question])[0] if vector is None else vector


def dense(memory: TemporalMemory, depth: int = DEPTH) -> Ranker:
    """The dense baseline (module docs)."""

    def rank(question: str, vector: np.ndarray | None, now: int) -> list[int]:
        return by_score(memory.store.retrieve_vector(_embedded(memory, question, vector), depth))

    return rank


def bm25(memory: TemporalMemory, depth: int = DEPTH) -> Ranker:
    """The BM25 baseline (module docs) over the facts stored when it is made."""
    records = memory.store.records()
    ids = np.asarray([r.id for r in records])
    index = LexicalIndex([fact_text(r.subject, r.relation, r.object) for r in records])

    def rank(question: str, vector: np.ndarray | None, now: int) -> list[int]:
        scores = index.scores(question)
        top = np.argpartition(-scores, depth)[:depth] if len(scores) > depth else np.arange(len(scores))
        top = top[np.lexsort((top, -scores[top]))]
        return ids[top].tolist()

    return rank


def symbolic(
    memory: TemporalMemory, named_first: bool = False, depth: int = DEPTH, pool: int = POOL
) -> Ranker:
    """The symbolic baseline (module docs); ``named_first``: the date sort puts the pool's facts that
    name an entity of the question (its subject or object string, case-insensitive) first, so the
    earliest fact is the asked slot's rather than the pool's (the rest follow, also by date)."""

    def rank(question: str, vector: np.ndarray | None, now: int) -> list[int]:
        found = memory.store.retrieve_vector(_embedded(memory, question, vector), pool)
        candidates = sorted(found, key=lambda r: -(r.score or 0.0))
        times = memory.times([r.id for r in candidates])
        day = {r.id: times[r.id][0] for r in candidates if r.id in times}
        asked = query_mode(question, now)
        kept = candidates
        if asked.mode == QueryMode.EXPLICIT:
            span, words = asked.span, question.lower()
            if f"before {span.text.lower()}" in words:
                keep = lambda d: d < span.start  # noqa: E731
            elif f"after {span.text.lower()}" in words:
                keep = lambda d: d > span.end  # noqa: E731
            else:
                keep = span.contains
            kept = [r for r in candidates if r.id in day and keep(day[r.id])] or candidates
        ids = [r.id for r in kept]
        named: set[int] = set()
        if named_first:
            words = question.lower()
            named = {r.id for r in kept if r.subject.lower() in words or r.object.lower() in words}
        if _FIRST.search(question):  # without named_first every fact is in the same (second) tier
            ids.sort(key=lambda i: (i not in named, day.get(i, np.inf)))
        elif _LAST.search(question) or _CURRENT.search(question):
            ids.sort(key=lambda i: (i not in named, -day.get(i, -np.inf)))
        return ids[:depth]

    return rank


def tem(memory: TemporalMemory, depth: int = DEPTH) -> Ranker:
    """The TEM-labels baseline (module docs)."""

    def rank(question: str, vector: np.ndarray | None, now: int) -> list[int]:
        records = memory.store.retrieve_vector(_embedded(memory, question, vector), depth)
        return [r.id for r in sorted(records, key=lambda r: (r.historical, -r.session_index, r.id))]

    return rank


def hybrid(memory: TemporalMemory, depth: int = DEPTH) -> Ranker:
    """The hybrid retriever (dense + BM25, ``HybridRetriever``'s defaults): the facts of its top
    ``depth`` evidence units, best unit first, at most ``depth``."""
    retriever = HybridRetriever(memory)

    def rank(question: str, vector: np.ndarray | None, now: int) -> list[int]:
        units = retriever.ranked(question, depth, vector=vector, now=now)
        return [r.id for unit in units for r in unit.records][:depth]

    return rank


def temporal(memory: TemporalMemory, depth: int = DEPTH) -> Ranker:
    """``TemporalMemory.retrieve``'s top ``depth``, best ``S_final`` first (the memory embeds the
    question itself: ``vector`` is not used)."""

    def rank(question: str, vector: np.ndarray | None, now: int) -> list[int]:
        found = memory.retrieve(question, k=depth, now=now)
        return [t.record.id for t in sorted(found, key=lambda t: -t.score)]

    return rank


def best(
    memory: TemporalMemory, beta: float, constrain: bool, pool: int = POOL, depth: int = DEPTH
) -> Ranker:
    """``BestMemory`` over ``memory``: the hybrid top ``pool`` re-ranked by ``score + beta * S_kge``
    (``beta`` 0 or no fitted model: the hybrid order), then, with ``constrain``, the question's time
    constraint applied; best first."""
    found = BestMemory(memory, beta=beta, pool=pool, constrain=constrain, rerank=beta > 0)

    def rank(question: str, vector: np.ndarray | None, now: int) -> list[int]:
        return [t.record.id for t in found.retrieve(question, depth, now, vector=vector)]

    return rank
