"""``KindIndexes``: a store's in-memory inner-product indexes, one per kind (facts, turns,
summaries), and how far each table is indexed.

Built on open from the vectors stored in the database (so nothing but the database needs to
persist), then extended with the rows a store writes and those other connections commit. Fact
vectors enter the index multiplied by their relation weight, so the inner product *is* the
weighted similarity and the top ``k`` is exact; changing weights takes effect at the next open.
Rows are append-only with ids handed out under the write lock, so "every id above the largest one
indexed" (``indexed_upto``) is exactly what is new.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rotmem.index import InnerProductIndex, make_index
from rotmem.memory.records import PASSAGE_KINDS
from rotmem.memory.storage.database import MemoryDatabase

FACT_KIND = "fact"
NewRows = tuple[tuple, tuple]  # (fact ids, relations, vectors), (passage ids, kinds, vectors)


class KindIndexes:
    """The indexes of one store (module docs).

    Args:
        weight_of: relation -> weight, applied to fact vectors as they are added.
        backend, device, options: ``rotmem.index.make_index``'s arguments.
    """

    def __init__(
        self,
        weight_of: Callable[[str], float],
        backend: str = "auto",
        device: str | None = None,
        options: Mapping[str, Any] | None = None,
    ):
        self.weight_of = weight_of
        self.backend, self.device, self.options = backend, device, dict(options or {})
        self.indexes: dict[str, InnerProductIndex] = {}
        self.indexed_upto = {"facts": -1, "passages": -1}  # largest row id in the indexes

    def get(self, kind: str) -> InnerProductIndex | None:
        return self.indexes.get(kind)

    def read_new_rows(self, db: MemoryDatabase, dim: int | None) -> NewRows | None:
        """Fact and passage rows (``ids, relations|kinds, vectors``) above the indexed ids."""
        if dim is None:
            return None
        return (
            db.vectors("facts", "relation", dim, after_id=self.indexed_upto["facts"]),
            db.vectors("passages", "kind", dim, after_id=self.indexed_upto["passages"]),
        )

    def add_rows(self, rows: NewRows | None) -> int:
        """Add rows from ``read_new_rows`` to the indexes; returns how many."""
        if rows is None:
            return 0
        (fact_ids, relations, fact_vectors), (passage_ids, kinds, passage_vectors) = rows
        fact_ids = fact_ids[fact_ids > self.indexed_upto["facts"]]  # a concurrent refresh may have added some
        keep = len(relations) - len(fact_ids)
        self.add_facts(fact_ids, relations[keep:], fact_vectors[keep:])
        fresh = passage_ids > self.indexed_upto["passages"]
        self.add_passages(passage_ids[fresh], np.asarray(kinds, dtype=object)[fresh], passage_vectors[fresh])
        return int(fact_ids.size + fresh.sum())

    def add_facts(self, ids: np.ndarray, relations: Sequence[str], vectors: np.ndarray) -> None:
        """Facts' unit vectors ``[N, D]``, weighted by their relations here."""
        self._add(FACT_KIND, ids, vectors * self._weights(relations)[:, None])
        if ids.size:
            self.indexed_upto["facts"] = int(ids.max())

    def add_passages(self, ids: np.ndarray, kinds: Sequence[str], vectors: np.ndarray) -> None:
        """Passages' unit vectors ``[N, D]`` into the index of each one's kind."""
        if ids.size == 0:  # most writes (one-fact sessions) have no passages
            return
        kinds = np.asarray(kinds, dtype=object)
        for kind in PASSAGE_KINDS:
            mask = kinds == kind
            self._add(kind, ids[mask], vectors[mask])
        self.indexed_upto["passages"] = int(ids.max())

    def _weights(self, relations: Sequence[str]) -> np.ndarray:
        cache: dict[str, float] = {}
        out = np.empty(len(relations), dtype=np.float32)
        for i, relation in enumerate(relations):
            if relation not in cache:
                cache[relation] = self.weight_of(relation)
            out[i] = cache[relation]
        return out

    def _add(self, kind: str, ids: np.ndarray, vectors: np.ndarray) -> None:
        if ids.size == 0:
            return
        if kind not in self.indexes:
            self.indexes[kind] = make_index(
                vectors.shape[1], backend=self.backend, device=self.device, **self.options
            )
        self.indexes[kind].add(ids, vectors)
