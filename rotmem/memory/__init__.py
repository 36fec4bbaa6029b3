"""Agent memory: TEM's versioned fact store (``TEMStore``) on SQLite and one inner-product index.

>>> store = TEMStore("memory.db")
>>> store.add_session("s1", [("Alice", "lives in", "Paris")], text="Alice: I live in Paris.")
>>> store.add_session("s2", [("Alice", "moved to", "Berlin")], text="Alice: I moved to Berlin!")
>>> print(store.render(store.retrieve("Where does Alice live?")))
s1: Alice moved to Berlin
s0: Alice lives in Paris [historical]
"""

from rotmem.memory.embedding_cache import CachedEncoder, EmbeddingCache
from rotmem.memory.encoder import HashingEncoder, SentenceEncoder, TextEncoder
from rotmem.memory.records import (
    DuplicateSessionError,
    ExtractedFact,
    Passage,
    Record,
    Session,
    SessionResult,
)
from rotmem.memory.render import render
from rotmem.memory.retrieval import BestMemory, render_in_source_order
from rotmem.memory.tem.relation_weights import DEFAULT_SYNONYMS, DEFAULT_WEIGHTS, RelationWeights
from rotmem.memory.tem.store import TEMStore
from rotmem.memory.temporal.fit import FitConfig
from rotmem.memory.temporal.memory import TemporalMemory

__all__ = [
    "BestMemory",
    "CachedEncoder",
    "DEFAULT_SYNONYMS",
    "DEFAULT_WEIGHTS",
    "DuplicateSessionError",
    "EmbeddingCache",
    "ExtractedFact",
    "FitConfig",
    "HashingEncoder",
    "Passage",
    "Record",
    "RelationWeights",
    "SentenceEncoder",
    "Session",
    "SessionResult",
    "TEMStore",
    "TemporalMemory",
    "TextEncoder",
    "render",
    "render_in_source_order",
]
