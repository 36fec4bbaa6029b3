"""BM25 over memory texts, here with the rest of retrieval (its code: ``rotmem.memory.lexical``)."""

from rotmem.memory.lexical import LexicalIndex

__all__ = ["LexicalIndex"]
