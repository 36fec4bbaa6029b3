"""BM25 over memory texts (facts and turns), the lexical half of hybrid retrieval.

Tokens: lower-cased runs of two or more word characters, English stop words removed (``bm25s``'s
list: an optional dependency, ``pip install 'rotmem[memory]'`` or ``pip install bm25s``), no
stemming. Scores: the Lucene variant of BM25 with bm25s's defaults (``k1 = 1.5``, ``b = 0.75``),
each token of the question counted as often as it occurs there::

    score(d) = sum over question tokens t of idf(t) · tf / (tf + k1 · (1 − b + b · |d| / avgdl))
    idf(t) = ln(1 + (N − df + 0.5) / (df + 0.5))

The index grows: ``add`` appends texts, and a question is scored against what is in the index at
that moment (N, avgdl and df included), the same as an index built over all of them at once. A
question whose words occur in no text scores 0 everywhere.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

from rotmem.index.growing import GrowingArray

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
K1, B = 1.5, 0.75


def english_stopwords() -> frozenset[str]:
    """bm25s's English stop words (one line naming the package when it is missing)."""
    try:
        from bm25s.stopwords import STOPWORDS_EN
    except ImportError:
        raise ImportError(
            "lexical (BM25) retrieval needs bm25s: pip install 'rotmem[memory]' (or pip install bm25s)"
        ) from None
    return frozenset(STOPWORDS_EN)


def tokenize(text: str, stopwords: frozenset[str] = frozenset()) -> list[str]:
    """Lower-cased word tokens of two or more characters, ``stopwords`` removed."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in stopwords]


class LexicalIndex:
    """BM25 (module docs) over a list of texts that ``add`` extends."""

    def __init__(self, texts: Sequence[str] = (), k1: float = K1, b: float = B):
        self._stopwords = english_stopwords()
        self.k1, self.b = float(k1), float(b)
        self._postings: dict[str, tuple[GrowingArray, GrowingArray]] = {}  # token -> (texts, counts)
        self._lengths = GrowingArray(np.float64)
        self._norm: np.ndarray | None = None  # k1 · (1 − b + b · |d| / avgdl) per text, until ``add``
        self.add(texts)

    @property
    def size(self) -> int:
        return self._lengths.size

    def add(self, texts: Iterable[str]) -> None:
        """Append ``texts`` (their positions continue from ``len(self)``)."""
        for text in texts:
            tokens = tokenize(text, self._stopwords)
            counts: dict[str, int] = {}
            for token in tokens:
                counts[token] = counts.get(token, 0) + 1
            position = self.size
            for token, count in counts.items():
                if token not in self._postings:
                    self._postings[token] = GrowingArray(np.int64), GrowingArray(np.float64)
                texts_of, counts_of = self._postings[token]
                texts_of.append(position)
                counts_of.append(count)
            self._lengths.append(len(tokens))
        self._norm = None  # N and avgdl have changed

    def scores(self, query: str) -> np.ndarray:
        """``[len(texts)]`` float32 BM25 scores of every text for ``query``."""
        return self._accumulate(query)[0].astype(np.float32)

    def sparse_scores(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """``scores`` where they are not 0: the texts sharing a token with ``query`` (``positions``,
        ascending) and their float32 scores, found from the postings rather than by a scan of the
        scores (every BM25 term is positive)."""
        summed, hit = self._accumulate(query)
        positions = np.flatnonzero(hit)
        return positions, summed[positions].astype(np.float32)

    def _accumulate(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """``[len(texts)]`` float64 scores, summed token by token, and which texts a token reached."""
        n = self.size
        out, hit = np.zeros(n, dtype=np.float64), np.zeros(n, dtype=bool)
        tokens = [t for t in tokenize(query, self._stopwords) if t in self._postings]
        if tokens and self._norm is None:
            lengths = self._lengths.values
            self._norm = self.k1 * ((1 - self.b) + self.b * lengths / lengths.mean())
        for token in tokens:
            texts, counts = (growing.values for growing in self._postings[token])
            idf = np.log(1 + (n - len(texts) + 0.5) / (len(texts) + 0.5))
            out[texts] += idf * counts / (counts + self._norm[texts])
            hit[texts] = True
        return out, hit

    def __len__(self) -> int:
        return self.size
