"""BM25 over memory texts (facts and turns), the lexical half of hybrid retrieval.

Backed by ``bm25s`` (an optional dependency: ``pip install 'rotmem[memory]'``, or ``pip install
bm25s``). Tokens: lower-cased runs of two or more word characters, English stop words removed
(bm25s's own list), no stemming. A question whose words occur in no text scores 0 everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

_TOKEN = re.compile(r"(?u)\b\w\w+\b")


def _bm25s() -> Any:
    try:
        import bm25s
        from bm25s.stopwords import STOPWORDS_EN
    except ImportError:
        raise ImportError(
            "lexical (BM25) retrieval needs bm25s: pip install 'rotmem[memory]' (or pip install bm25s)"
        ) from None
    return bm25s, frozenset(STOPWORDS_EN)


def tokenize(text: str, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """Lower-cased word tokens of two or more characters, ``stopwords`` removed."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in stopwords]


class LexicalIndex:
    """BM25 (bm25s defaults: Lucene variant, k1 = 1.5, b = 0.75) over a fixed list of texts."""

    def __init__(self, texts: Sequence[str]):
        bm25s, self._stopwords = _bm25s()
        self.size = len(texts)
        self._bm25 = bm25s.BM25()
        if texts:
            self._bm25.index([tokenize(t, self._stopwords) for t in texts], show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """``[len(texts)]`` float32 BM25 scores of every text for ``query``."""
        if self.size == 0:
            return np.zeros(0, dtype=np.float32)
        tokens = tokenize(query, self._stopwords)
        if not tokens:
            return np.zeros(self.size, dtype=np.float32)
        return np.asarray(self._bm25.get_scores(tokens), dtype=np.float32)

    def __len__(self) -> int:
        return self.size
