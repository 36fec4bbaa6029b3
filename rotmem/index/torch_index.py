"""Exact inner-product search in plain torch: a matrix on the device and a chunked ``torch.topk``.

Used when FAISS is absent (the GPU machine has none) and for CUDA tensors without ``faiss-gpu``.
Memory for one search is ``[query_chunk, row_chunk]`` scores, not ``[B, N]``.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np
import torch

from rotmem.index.base import (
    ArrayLike,
    IdsLike,
    InnerProductIndex,
    as_float_tensor,
    as_id_array,
    check_dim,
    check_ids_vectors,
    check_k,
    check_vectors,
    duplicate_error,
    missing_error,
    wrap_results,
)

TORCH_FORMAT = "rotmem.index.torch/1"


class TorchIndex(InnerProductIndex):
    """Exact flat index: ``vectors [N, dim]`` float32 on ``device``, searched chunk by chunk.

    ``row_chunk`` database rows and ``query_chunk`` queries are scored at a time (peak extra memory
    ``4 * row_chunk * query_chunk`` bytes). Removal moves the last row into the freed slot.
    """

    def __init__(
        self,
        dim: int,
        device: str | torch.device | None = None,
        row_chunk: int = 65536,
        query_chunk: int = 1024,
    ):
        self.dim = check_dim(dim)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.row_chunk, self.query_chunk = int(row_chunk), int(query_chunk)
        self._vectors = torch.empty(0, self.dim, dtype=torch.float32, device=self.device)
        self._ids = torch.empty(0, dtype=torch.int64, device=self.device)
        self._size = 0
        self._row_of: dict[int, int] = {}

    def __len__(self) -> int:
        return self._size

    def _reserve(self, extra: int) -> None:
        need = self._size + extra
        if need <= self._vectors.shape[0]:
            return
        capacity = max(need, 2 * self._vectors.shape[0], 1024)
        vectors = torch.empty(capacity, self.dim, dtype=torch.float32, device=self.device)
        ids = torch.empty(capacity, dtype=torch.int64, device=self.device)
        vectors[: self._size] = self._vectors[: self._size]
        ids[: self._size] = self._ids[: self._size]
        self._vectors, self._ids = vectors, ids

    def add(self, ids: IdsLike, vectors: ArrayLike) -> None:
        """Store ``vectors [n, dim]`` under new ``ids [n]``."""
        id_array = as_id_array(ids)
        vectors = check_vectors(as_float_tensor(vectors), self.dim)
        check_ids_vectors(id_array, vectors)
        duplicates = [int(i) for i in id_array if int(i) in self._row_of]
        if duplicates:
            raise duplicate_error(duplicates)
        n = id_array.shape[0]
        self._reserve(n)
        start = self._size
        self._vectors[start : start + n] = vectors.to(self.device)
        self._ids[start : start + n] = torch.from_numpy(id_array).to(self.device)
        for offset, i in enumerate(id_array.tolist()):
            self._row_of[i] = start + offset
        self._size += n

    def remove(self, ids: IdsLike) -> int:
        """Delete the vectors of ``ids`` (all must be present); returns how many were removed."""
        id_array = as_id_array(ids)
        missing = [int(i) for i in id_array if int(i) not in self._row_of]
        if missing:
            raise missing_error(missing)
        for i in id_array.tolist():
            row, last = self._row_of.pop(i), self._size - 1
            if row != last:
                moved = int(self._ids[last])
                self._vectors[row] = self._vectors[last]
                self._ids[row] = moved
                self._row_of[moved] = row
            self._size -= 1
        return int(id_array.shape[0])

    @torch.no_grad()
    def search(self, queries: ArrayLike, k: int) -> tuple[Any, Any]:
        """Exact top-``k`` ``(scores [B, k'], ids [B, k'])``, ``k' = min(k, len(self))``."""
        k = check_k(k)
        q = check_vectors(as_float_tensor(queries), self.dim, "queries").to(self.device)
        k = min(k, self._size)
        scores = torch.empty(q.shape[0], k, dtype=torch.float32, device=self.device)
        rows = torch.empty(q.shape[0], k, dtype=torch.int64, device=self.device)
        for qs in range(0, q.shape[0], self.query_chunk):
            scores[qs : qs + self.query_chunk], rows[qs : qs + self.query_chunk] = self._top_rows(
                q[qs : qs + self.query_chunk], k
            )
        return wrap_results(scores, self._ids[rows], queries)

    def _top_rows(self, q: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Best ``k`` rows for a chunk of queries, merging per-chunk ``topk`` results."""
        best_scores = torch.empty(q.shape[0], 0, dtype=torch.float32, device=self.device)
        best_rows = torch.empty(q.shape[0], 0, dtype=torch.int64, device=self.device)
        for start in range(0, self._size, self.row_chunk):
            block = self._vectors[start : min(start + self.row_chunk, self._size)]
            s, r = torch.topk(q @ block.T, min(k, block.shape[0]), dim=1)
            best_scores = torch.cat([best_scores, s], dim=1)
            best_rows = torch.cat([best_rows, r + start], dim=1)
            if best_scores.shape[1] > k:
                best_scores, pick = torch.topk(best_scores, k, dim=1)
                best_rows = best_rows.gather(1, pick)
        return best_scores, best_rows

    def vectors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ids [N], vectors [N, dim])`` currently stored (views, in storage order)."""
        return self._ids[: self._size], self._vectors[: self._size]

    def save(self, path: str) -> None:
        """Write ids and vectors with ``torch.save`` (readable by ``TorchIndex.load``)."""
        ids, vectors = self.vectors()
        payload = {"format": TORCH_FORMAT, "dim": self.dim, "ids": ids.cpu(), "vectors": vectors.cpu()}
        torch.save(payload, path)

    @classmethod
    def load(cls, path: str, **options: Any) -> Self:
        """Read a file written by ``TorchIndex.save``; ``options`` go to the constructor."""
        payload = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(payload, dict) or payload.get("format") != TORCH_FORMAT:
            raise ValueError(f"{path} is not a rotmem torch index file")
        index = cls(int(payload["dim"]), **options)
        index.add(np.asarray(payload["ids"].numpy()), payload["vectors"])
        return index
