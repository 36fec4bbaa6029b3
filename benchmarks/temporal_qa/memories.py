"""The memories compared on temporal questions: each ranks stored facts (record ids) for a question.

Every memory reads the same ``TemporalMemory`` (one ``TEMStore`` of fact sentences ``"head relation
tail"`` embedded once, with each fact's day); the question's embedding is computed once, outside the
timed call. ``rank(question, vector) -> record ids``, best first, at most ``DEPTH``.

- ``dense``: cosine of MiniLM embeddings (the store's index), best first;
- ``bm25``: BM25 over the fact sentences;
- ``hybrid``: ``rotmem.memory.retrieval.hybrid`` (dense + BM25 z-scores, plus a boost for facts dated inside
  an explicit span, or holding a time for a time-seeking question);
- ``symbolic``: what an engineer would write without a model: the dense top ``POOL``, filtered by the
  question's time constraint (``rotmem.memory.temporal.time_expressions``; "before"/"after" a span cut at its
  first/last day, any other span keeps facts inside it) and sorted by date for "first" (earliest
  first), "last" and current-state questions ("these days", "now", "nowadays": latest first);
  ties and unsorted questions keep the dense order. It does not resolve event anchors ("After A, who
  was the first ..." is sorted as "first", with no anchor); ``symbolic-named``: the same, with the
  date sort among the facts that name an entity of the question first (string match);
- ``tem``: TEM's read path (the dense top ``DEPTH`` by cosine x relation weight) with its labels
  applied the way a reader would: current versions before ``[historical]`` ones, newest first;
- ``romem-gate``, ``romem-no-gate``, ``discrete``: ``TemporalMemory.retrieve`` (``S_sem · (1 + 0.3 ·
  S_kge)`` over the dense top 50) with RoMem fitted with gate speeds, with alpha = 1 for every
  relation, or TNTComplEx (per-day embeddings) fitted in RoMem's place; ``history``: TNTComplEx
  with the history term (``rotmem.models.history``) in RoMem's place; best ``S_final`` first;
- ``romem-hybrid`` (and ``history-hybrid``, with the history model): ``rotmem.memory.BestMemory``
  without the time constraint: the hybrid memory's top ``POOL`` facts re-ranked by ``hybrid score +
  beta · S_kge`` (RoMem's probability of the fact's object at the question's day, as in
  ``TemporalMemory.retrieve``; the hybrid score is a sum of z-scores, so RoMem is added, not
  multiplied);
- ``hybrid-time``: ``BestMemory`` with the time constraint and no re-rank (the hybrid top
  ``TIME_POOL``, constraint applied: ``rotmem.memory.retrieval.constrain``);
  ``romem-hybrid-time``, ``history-hybrid-time``: the same on the re-ranked candidates
  (``history-hybrid-time`` is ``BestMemory.preset``'s configuration).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from rotmem.memory import BestMemory
from rotmem.memory.retrieval.hybrid import HybridRetriever
from rotmem.memory.retrieval.lexical import LexicalIndex
from rotmem.memory.tem.store import fact_text
from rotmem.memory.temporal.memory import TemporalMemory
from rotmem.memory.temporal.time_expressions import QueryMode, query_mode

DEPTH = 10
POOL = 50  # the symbolic baseline's dense pool: as many as TemporalMemory re-ranks
TIME_POOL = 100  # hybrid candidates the time constraint sees (BestMemory's default)

Ranker = Callable[[str, np.ndarray, int], list[int]]  # (question, vector, asked-on day) -> record ids

_CURRENT = re.compile(r"\b(?:these days|nowadays|now)\b", re.IGNORECASE)
_FIRST = re.compile(r"\bfirst\b", re.IGNORECASE)
_LAST = re.compile(r"\blast\b", re.IGNORECASE)


def by_score(records) -> list[int]:
    """Record ids by descending score (ties: older first, the store's source order)."""
    return [r.id for r in sorted(records, key=lambda r: -(r.score or 0.0))]


def dense(memory: TemporalMemory) -> Ranker:
    return lambda question, vector, now: by_score(memory.store.retrieve_vector(vector, DEPTH))


def bm25(memory: TemporalMemory) -> Ranker:
    records = memory.store.records()
    ids = np.asarray([r.id for r in records])
    index = LexicalIndex([fact_text(r.subject, r.relation, r.object) for r in records])

    def rank(question: str, vector: np.ndarray, now: int) -> list[int]:
        scores = index.scores(question)
        top = np.argpartition(-scores, DEPTH)[:DEPTH] if len(scores) > DEPTH else np.arange(len(scores))
        top = top[np.lexsort((top, -scores[top]))]
        return ids[top].tolist()

    return rank


def hybrid(memory: TemporalMemory) -> Ranker:
    retriever = HybridRetriever(memory)

    def rank(question: str, vector: np.ndarray, now: int) -> list[int]:
        units = retriever.ranked(question, DEPTH, vector=vector, now=now)
        return [r.id for unit in units for r in unit.records][:DEPTH]

    return rank


def symbolic(memory: TemporalMemory, named_first: bool = False) -> Ranker:
    """The symbolic baseline (module docs); ``named_first``: the date sort puts the pool's facts that
    name an entity of the question (its subject or object string, case-insensitive) first, so the
    earliest fact is the asked slot's rather than the pool's (the rest follow, also by date)."""

    def rank(question: str, vector: np.ndarray, now: int) -> list[int]:
        pool = sorted(memory.store.retrieve_vector(vector, POOL), key=lambda r: -(r.score or 0.0))
        times = memory.times([r.id for r in pool])
        day = {r.id: times[r.id][0] for r in pool if r.id in times}
        asked = query_mode(question, now)
        kept = pool
        if asked.mode == QueryMode.EXPLICIT:
            span, words = asked.span, question.lower()
            if f"before {span.text.lower()}" in words:
                keep = lambda d: d < span.start  # noqa: E731
            elif f"after {span.text.lower()}" in words:
                keep = lambda d: d > span.end  # noqa: E731
            else:
                keep = span.contains
            kept = [r for r in pool if r.id in day and keep(day[r.id])] or pool
        ids = [r.id for r in kept]
        named: set[int] = set()
        if named_first:
            words = question.lower()
            named = {r.id for r in kept if r.subject.lower() in words or r.object.lower() in words}
        if _FIRST.search(question):  # without named_first every fact is in the same (second) tier
            ids.sort(key=lambda i: (i not in named, day.get(i, np.inf)))
        elif _LAST.search(question) or _CURRENT.search(question):
            ids.sort(key=lambda i: (i not in named, -day.get(i, -np.inf)))
        return ids[:DEPTH]

    return rank


def tem(memory: TemporalMemory) -> Ranker:
    def rank(question: str, vector: np.ndarray, now: int) -> list[int]:
        records = memory.store.retrieve_vector(vector, DEPTH)
        return [r.id for r in sorted(records, key=lambda r: (r.historical, -r.session_index, r.id))]

    return rank


def temporal(memory: TemporalMemory) -> Ranker:
    """``TemporalMemory.retrieve``'s top ``DEPTH``, best ``S_final`` first."""

    def rank(question: str, vector: np.ndarray, now: int) -> list[int]:
        found = memory.retrieve(question, k=DEPTH, now=now)
        return [t.record.id for t in sorted(found, key=lambda t: -t.score)]

    return rank


def best(memory: TemporalMemory, beta: float, constrain: bool, pool: int = POOL) -> Ranker:
    """``rotmem.memory.BestMemory`` over ``memory``: the hybrid top ``pool`` re-ranked by ``score +
    beta * S_kge`` (``beta`` 0 or no fitted model: the hybrid order), then, with ``constrain``, the
    question's time constraint applied; best first."""
    found = BestMemory(memory, beta=beta, pool=pool, constrain=constrain, rerank=beta > 0)

    def rank(question: str, vector: np.ndarray, now: int) -> list[int]:
        return [t.record.id for t in found.retrieve(question, DEPTH, now, vector=vector)]

    return rank
