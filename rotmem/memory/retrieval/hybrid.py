"""The hybrid retriever, here with the rest of retrieval (its code: ``rotmem.memory.hybrid``)."""

from rotmem.memory.hybrid import LEXICAL_WEIGHT, POOL, TIME_BOOST, Evidence, HybridRetriever, render_evidence

__all__ = ["LEXICAL_WEIGHT", "POOL", "TIME_BOOST", "Evidence", "HybridRetriever", "render_evidence"]
