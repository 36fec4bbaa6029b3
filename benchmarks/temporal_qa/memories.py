"""The memories compared on temporal questions: each ranks stored facts (record ids) for a question."""

import numpy as np

from rotmem.memory import BestMemory
from rotmem.memory.retrieval.baselines import DEPTH, POOL, Ranker, bm25, dense, symbolic, tem
from rotmem.memory.retrieval.hybrid import HybridRetriever
from rotmem.memory.temporal.memory import TemporalMemory

__all__ = ["DEPTH", "POOL", "Ranker", "bm25", "dense", "symbolic", "tem"]  # the baselines, re-exported

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
