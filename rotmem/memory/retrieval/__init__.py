"""Retrieval over a memory: the hybrid (dense + BM25) retriever, BM25, the question's time
constraint, ``BestMemory``, which puts them together with RoMem's re-rank, and the baselines
they are compared against.

- ``hybrid``: ``HybridRetriever``, ``Evidence``, ``render_evidence``;
- ``lexical``: ``LexicalIndex`` (BM25);
- ``baselines``: ``dense``, ``bm25``, ``symbolic``, ``tem`` rankers, and ``hybrid``, ``temporal``,
  ``best``: the library's own memories as rankers;
- ``time_constraint``: ``parse_time_constraint`` -> ``TimeConstraint``;
- ``constrain``: ``apply_constraint`` on scored ``Candidate``s;
- ``best``: ``BestMemory`` (``BestMemory.preset``), ``render_in_source_order``.
"""

from rotmem.memory.retrieval.best import BestMemory, preset_fit_config, render_in_source_order
from rotmem.memory.retrieval.constrain import Candidate, apply_constraint
from rotmem.memory.retrieval.hybrid import Evidence, HybridRetriever, render_evidence
from rotmem.memory.retrieval.lexical import LexicalIndex
from rotmem.memory.retrieval.time_constraint import TimeConstraint, parse_time_constraint

__all__ = [
    "BestMemory",
    "Candidate",
    "Evidence",
    "HybridRetriever",
    "LexicalIndex",
    "TimeConstraint",
    "apply_constraint",
    "parse_time_constraint",
    "preset_fit_config",
    "render_evidence",
    "render_in_source_order",
]
