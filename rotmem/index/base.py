"""The inner-product index interface shared by the FAISS and torch backends.

Every index maps non-negative int64 ids to float32 vectors of one width ``dim`` and answers
maximum-inner-product queries exactly (the IVF option of the FAISS backend is the one
approximate exception). Both backends follow the same rules, so callers never branch on them:

- ``add(ids [n], vectors [n, dim])``: ids must be new (a duplicate raises ``ValueError`` naming it).
- ``remove(ids [m])``: ids must be present (an unknown id raises ``KeyError`` naming it); returns m.
- ``search(queries [B, dim], k) -> (scores [B, k'], ids [B, k'])`` with ``k' = min(k, len(index))``,
  best first; an empty index gives ``[B, 0]`` results. The result type follows the query type:
  NumPy in, NumPy out; a torch tensor in, torch tensors out on the query's device.
- ``save(path)`` / ``Class.load(path)``; ``rotmem.index.load_index(path)`` picks the class.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Self

import numpy as np
import torch

ArrayLike = np.ndarray | torch.Tensor | Sequence[Sequence[float]]
IdsLike = np.ndarray | torch.Tensor | Sequence[int]


class InnerProductIndex(ABC):
    """Maximum-inner-product search over float32 vectors keyed by int64 ids (see module docs)."""

    dim: int

    @abstractmethod
    def add(self, ids: IdsLike, vectors: ArrayLike) -> None:
        """Store ``vectors [n, dim]`` under the new ``ids [n]``."""

    @abstractmethod
    def remove(self, ids: IdsLike) -> int:
        """Delete the vectors stored under ``ids``; returns how many were removed."""

    @abstractmethod
    def search(self, queries: ArrayLike, k: int) -> tuple[Any, Any]:
        """Top-``k`` ``(scores [B, k'], ids [B, k'])`` by inner product, best first."""

    @abstractmethod
    def save(self, path: str) -> None:
        """Write the index to ``path`` (one file)."""

    @classmethod
    @abstractmethod
    def load(cls, path: str, **options: Any) -> Self:
        """Read an index written by ``save``."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of stored vectors."""


def check_dim(dim: int) -> int:
    """``dim`` as a positive int, or a ValueError naming it."""
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
        raise ValueError(f"index dim must be a positive integer, got {dim!r}")
    return int(dim)


def check_k(k: int) -> int:
    """``k`` as a positive int, or a ValueError naming it."""
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    return int(k)


def as_id_array(ids: IdsLike) -> np.ndarray:
    """``ids`` as a 1-D int64 NumPy array of non-negative values (-1 is FAISS's "no result")."""
    if isinstance(ids, torch.Tensor):
        ids = ids.detach().cpu().numpy()
    arr = np.asarray(ids)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"ids must be 1-D, got shape {tuple(arr.shape)}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"ids must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size and arr.min() < 0:
        raise ValueError(f"ids must be non-negative, got {arr[arr < 0][:5].tolist()}")
    if np.unique(arr).size != arr.size:
        values, counts = np.unique(arr, return_counts=True)
        raise ValueError(f"ids repeat within one call: {values[counts > 1][:5].tolist()}")
    return arr


def check_vectors(vectors: torch.Tensor, dim: int, what: str = "vectors") -> torch.Tensor:
    """``vectors`` as ``[n, dim]`` float32 with finite values, or a ValueError naming the problem."""
    if vectors.dim() == 1:
        vectors = vectors.unsqueeze(0)
    if vectors.dim() != 2 or vectors.shape[1] != dim:
        raise ValueError(f"{what} must have shape [n, {dim}], got {tuple(vectors.shape)}")
    vectors = vectors.to(torch.float32)
    bad = ~torch.isfinite(vectors).all(dim=1)
    if bool(bad.any()):
        raise ValueError(f"{what} rows {bad.nonzero().flatten()[:5].tolist()} hold NaN or inf")
    return vectors


def as_numpy_rows(x: ArrayLike, dim: int, what: str = "vectors") -> np.ndarray:
    """``x`` as a C-contiguous ``[n, dim]`` float32 NumPy array of finite values (for FAISS)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().to("cpu", torch.float32).numpy()
    array = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if array.ndim == 1:
        array = array.reshape(1, -1)
    if array.ndim != 2 or array.shape[1] != dim:
        raise ValueError(f"{what} must have shape [n, {dim}], got {tuple(array.shape)}")
    bad = ~np.isfinite(array).all(axis=1)
    if bad.any():
        raise ValueError(f"{what} rows {np.flatnonzero(bad)[:5].tolist()} hold NaN or inf")
    return array


def as_float_tensor(x: ArrayLike) -> torch.Tensor:
    """``x`` as a torch tensor without copying when it already is one (device kept)."""
    if isinstance(x, torch.Tensor):
        return x.detach()
    return torch.from_numpy(np.ascontiguousarray(np.asarray(x, dtype=np.float32)))


def check_ids_vectors(ids: np.ndarray, vectors: torch.Tensor) -> None:
    """Same number of ids and vectors, or a ValueError."""
    if ids.shape[0] != vectors.shape[0]:
        raise ValueError(f"got {ids.shape[0]} ids for {vectors.shape[0]} vectors")


def wrap_results(
    scores: torch.Tensor | np.ndarray, ids: torch.Tensor | np.ndarray, like: ArrayLike
) -> tuple[Any, Any]:
    """Results in the query's kind: torch tensors on its device, else NumPy arrays."""
    if isinstance(like, torch.Tensor):
        scores = torch.as_tensor(scores).to(like.device)
        ids = torch.as_tensor(ids).to(like.device)
        return scores, ids
    if isinstance(scores, torch.Tensor):
        return scores.cpu().numpy(), ids.cpu().numpy()
    return scores, ids


def duplicate_error(duplicates: Sequence[int]) -> ValueError:
    """The error for ids that are already stored."""
    return ValueError(f"ids already in the index: {list(duplicates)[:5]} (remove them first)")


def missing_error(missing: Sequence[int]) -> KeyError:
    """The error for ids that are not stored."""
    return KeyError(f"ids not in the index: {list(missing)[:5]}")
