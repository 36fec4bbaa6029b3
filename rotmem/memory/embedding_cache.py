"""A bounded text -> vector cache in front of a store's encoder (least recently used out first).

A knowledge graph that arrives day by day repeats itself: ICEWS05-15 tells 36,450 facts in 2012
with 19,568 distinct ``"subject relation object"`` sentences, each repeat on another day. An agent
memory that embeds every fact as it is told pays the encoder (MiniLM: milliseconds a sentence on a
CPU core, the whole cost of a write) once per distinct sentence when it keeps what it has embedded,
as a production store keeps an embedding cache. The vectors are the encoder's own (the same
``encode_texts`` call), so a hit returns exactly what a miss would have computed.

``capacity`` entries of ``D`` float32 each: 50,000 x 384 x 4 bytes = 77 MB at MiniLM's width.

``CachedEncoder`` is the same cache as an encoder: wrap one to embed each text once per process
(questions asked of several memories, turns stored twice), or ``put`` vectors computed elsewhere.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from rotmem.memory.encoder import TextEncoder, encode_texts, normalise_rows


class EmbeddingCache:
    """``encode(encoder, texts) -> [len(texts), D]`` float32, embedding only the texts not held.

    Args:
        capacity: most texts kept (0: no cache, every call goes to the encoder; None: no bound).

    ``misses`` counts texts embedded, ``hits`` texts that were not (held, or repeated in the call).
    """

    def __init__(self, capacity: int | None):
        if capacity is not None and (
            isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0
        ):
            raise ValueError(f"embedding cache capacity must be an integer >= 0, got {capacity!r}")
        self.capacity = capacity
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._vectors)

    def encode(self, encoder: TextEncoder, texts: Sequence[str], batch_size: int = 256) -> np.ndarray:
        """The encoder's unit rows for ``texts`` (``encode_texts``), held ones from the cache."""
        if self.capacity == 0 or not texts:
            self.misses += len(texts)
            return encode_texts(encoder, texts, batch_size)
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        fresh = dict(zip(missing, encode_texts(encoder, missing, batch_size), strict=True)) if missing else {}
        out = np.stack([fresh[t] if t in fresh else self._vectors[t] for t in texts])
        for text in dict.fromkeys(texts):
            if text in fresh:
                self._vectors[text] = fresh[text]
            else:
                self._vectors.move_to_end(text)
        while self.capacity is not None and len(self._vectors) > self.capacity:
            self._vectors.popitem(last=False)
        return out

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Hold ``vectors`` (rows, normalised here) as the embeddings of ``texts``."""
        for text, row in zip(texts, normalise_rows(np.asarray(vectors, dtype=np.float32)), strict=True):
            self._vectors[text] = row


class CachedEncoder:
    """A ``TextEncoder`` that embeds each text once: ``encoder`` behind an ``EmbeddingCache``.

    ``name`` is the wrapped encoder's (a store sees the same encoder); a call's missing texts go to
    the encoder in one call, so the vectors are the ones the encoder alone would give."""

    def __init__(self, encoder: TextEncoder, capacity: int | None = None):
        self.encoder, self.name = encoder, encoder.name
        self.cache = EmbeddingCache(capacity)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.cache.encode(self.encoder, list(texts), batch_size=max(len(texts), 1))

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Serve ``texts`` from ``vectors`` (computed elsewhere: a file, another run) from now on."""
        self.cache.put(texts, vectors)
