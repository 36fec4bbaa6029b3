"""The memories compared on temporal questions: each ranks stored facts (record ids) for a question.

Every memory reads the same ``TemporalMemory`` (one ``TEMStore`` of fact sentences ``"head relation
tail"`` embedded once, with each fact's day); the question's embedding is computed once, outside the
timed call. ``rank(question, vector) -> record ids``, best first, at most ``DEPTH``.

- ``dense``, ``bm25``, ``symbolic``, ``symbolic-named``, ``tem``: the library's baselines
  (``rotmem.memory.retrieval.baselines``: dense cosine, BM25 over the fact sentences, the dense pool
  filtered and sorted by the question's dates, TEM's labels applied as a reader would);
- ``hybrid``: ``rotmem.memory.retrieval.hybrid`` (dense + BM25 z-scores, plus a boost for facts
  dated inside an explicit span, or holding a time for a time-seeking question);
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

import numpy as np

from rotmem.memory import BestMemory
from rotmem.memory.retrieval.baselines import DEPTH, POOL, Ranker, bm25, dense, symbolic, tem
from rotmem.memory.retrieval.hybrid import HybridRetriever
from rotmem.memory.temporal.memory import TemporalMemory

__all__ = [
    "DEPTH",
    "POOL",
    "TIME_POOL",
    "Ranker",
    "best",
    "bm25",
    "dense",
    "hybrid",
    "symbolic",
    "tem",
    "temporal",
]

TIME_POOL = 100  # hybrid candidates the time constraint sees (BestMemory's default)


def hybrid(memory: TemporalMemory) -> Ranker:
    retriever = HybridRetriever(memory)

    def rank(question: str, vector: np.ndarray, now: int) -> list[int]:
        units = retriever.ranked(question, DEPTH, vector=vector, now=now)
        return [r.id for unit in units for r in unit.records][:DEPTH]

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
