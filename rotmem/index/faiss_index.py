"""FAISS inner-product index: exact flat (``IndexFlatIP`` in ``IndexIDMap2``) or IVF for ≥ 1M vectors.

The CPU index is the source of truth (add, remove, save). When ``faiss-gpu`` sees a CUDA device
(``device="auto"`` or ``"cuda"``), searches run on a GPU copy that is rebuilt lazily after a
change, because FAISS's GPU indexes cannot remove ids.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

import numpy as np
import torch

from rotmem.index.base import (
    ArrayLike,
    IdsLike,
    InnerProductIndex,
    as_id_array,
    as_numpy_rows,
    check_dim,
    check_ids_vectors,
    check_k,
    duplicate_error,
    missing_error,
    wrap_results,
)
from rotmem.index.int8_rows import Int8Rows

KINDS = ("flat", "ivf")
SMALL_BATCH = 20  # FAISS's own threshold (distance_compute_blas_threshold) for its non-BLAS path
INSTALL_HINT = "pip install faiss-cpu (or faiss-gpu for CUDA)"


def import_faiss() -> Any:
    """The ``faiss`` module, or an ImportError that names the package to install."""
    try:
        import faiss
    except ImportError as error:
        raise ImportError(f"the FAISS index backend needs the faiss package: {INSTALL_HINT}") from error
    return faiss


def faiss_available() -> bool:
    """Whether ``faiss`` can be imported here."""
    try:
        import_faiss()
    except ImportError:
        return False
    return True


def faiss_gpu_available() -> bool:
    """Whether this FAISS build has GPU support and sees at least one GPU."""
    if not faiss_available():
        return False
    faiss = import_faiss()
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


class FaissIndex(InnerProductIndex):
    """A FAISS index with the ``InnerProductIndex`` rules (unique ids, clipped ``k``).

    ``kind="flat"``: exact. ``kind="ivf"``: ``IndexIVFFlat`` (approximate, ``nprobe`` of ``nlist``
    lists scanned), trained on the vectors of the first ``add`` call, which must hold at least
    ``nlist`` vectors (default ``nlist = 4·√n`` of that call). ``device``: ``"cpu"``, ``"cuda"``
    (needs faiss-gpu) or ``"auto"`` (GPU when available). ``num_threads`` sets FAISS's OpenMP
    thread count for the whole process (``None`` keeps FAISS's default). ``small_batch_threads``:
    OpenMP threads for a search of fewer than ``SMALL_BATCH`` queries (default 1; ``None``: as any
    other search). One query at a time is the memory store's case, and there FAISS's default
    threads lose badly on a busy machine: on this project's shared 2-core CPU one query over 100k
    vectors took 72-157 ms with two threads and 16-55 ms with one.

    With one thread (the default), ``native_scan`` and rotmem's native extension built, a flat CPU
    index answers a batch of 1 to ``SMALL_BATCH - 1`` queries (one question, or a server's
    concurrent ones) itself: ``rotmem.ops.native.top_inner_products`` reads an int8 copy of the
    stored vectors (``rotmem.index.int8_rows``: a quarter of their bytes, up to half while its arrays
    double; kept up to date on ``add``)
    once for the batch and rescores exactly the few rows the copy cannot rule out. The result is the
    exact float32 top ``k`` (the scores of ``rotmem.ops.native.inner_products``, equal scores in
    storage order), the same for a query alone and in any such batch. Timed against FAISS's own
    paths in ``benchmarks/results/memory_scale.csv`` (``search_batch*``); the copy is built on the
    first such search (about a second for 100k vectors of 384).
    """

    def __init__(
        self,
        dim: int,
        kind: str = "flat",
        nlist: int | None = None,
        nprobe: int = 16,
        device: str = "auto",
        num_threads: int | None = None,
        small_batch_threads: int | None = 1,
        native_scan: bool = True,
    ):
        self._faiss = import_faiss()
        self.dim = check_dim(dim)
        if kind not in KINDS:
            raise ValueError(f"unknown index kind {kind!r}; expected one of {KINDS}")
        if device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
        if device == "cuda" and not faiss_gpu_available():
            raise RuntimeError("device='cuda' needs faiss-gpu and a CUDA device; use device='cpu'")
        self.kind, self.nlist, self.nprobe = kind, nlist, int(nprobe)
        self.small_batch_threads, self.native_scan = small_batch_threads, bool(native_scan)
        self.use_gpu = device == "cuda" or (device == "auto" and faiss_gpu_available())
        if num_threads is not None:
            self._faiss.omp_set_num_threads(int(num_threads))
        self._index = self._new_flat() if kind == "flat" else None
        self._ids: set[int] = set()
        self._id_rows: np.ndarray | None = None  # the flat index's ids in storage order, for the scan
        self._int8: Int8Rows | None = None  # the flat index's rows as int8, for the scan (kept on add)
        self._gpu_index: Any = None
        self._gpu_resources: Any = None

    def _new_flat(self) -> Any:
        return self._faiss.IndexIDMap2(self._faiss.IndexFlatIP(self.dim))

    def _new_ivf(self, train: np.ndarray) -> Any:
        nlist = self.nlist or max(1, int(4 * math.sqrt(train.shape[0])))
        if train.shape[0] < nlist:
            raise ValueError(
                f"an IVF index trains on its first add: got {train.shape[0]} vectors for nlist={nlist}; "
                "add at least nlist vectors at once or use kind='flat'"
            )
        quantizer = self._faiss.IndexFlatIP(self.dim)
        index = self._faiss.IndexIVFFlat(quantizer, self.dim, nlist, self._faiss.METRIC_INNER_PRODUCT)
        index.train(train)
        index.nprobe = min(self.nprobe, nlist)
        self.nlist = nlist
        return index

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, ids: IdsLike, vectors: ArrayLike) -> None:
        """Store ``vectors [n, dim]`` under new ``ids [n]`` (an IVF index trains on its first call)."""
        id_array = as_id_array(ids)
        array = as_numpy_rows(vectors, self.dim)
        check_ids_vectors(id_array, array)
        duplicates = [i for i in id_array.tolist() if i in self._ids]
        if duplicates:
            raise duplicate_error(duplicates)
        if id_array.size == 0:
            return
        if self._index is None:
            self._index = self._new_ivf(array)
        self._index.add_with_ids(array, id_array)
        self._ids.update(id_array.tolist())
        self._gpu_index = self._id_rows = None
        if self._int8 is not None:  # FAISS's flat index appends the new rows
            self._int8.append(array)

    def remove(self, ids: IdsLike) -> int:
        """Delete the vectors of ``ids`` (all must be present); returns how many were removed."""
        id_array = as_id_array(ids)
        missing = [i for i in id_array.tolist() if i not in self._ids]
        if missing:
            raise missing_error(missing)
        if id_array.size:
            self._index.remove_ids(id_array)
            self._ids.difference_update(id_array.tolist())
            self._gpu_index = self._id_rows = self._int8 = None
        return int(id_array.size)

    def _searcher(self) -> Any:
        if not self.use_gpu:
            return self._index
        if self._gpu_index is None:
            if self._gpu_resources is None:
                self._gpu_resources = self._faiss.StandardGpuResources()
            self._gpu_index = self._faiss.index_cpu_to_gpu(self._gpu_resources, 0, self._index)
        return self._gpu_index

    def search(self, queries: ArrayLike, k: int) -> tuple[Any, Any]:
        """Top-``k`` ``(scores [B, k'], ids [B, k'])``, ``k' = min(k, len(self))``, best first."""
        k = check_k(k)
        q = as_numpy_rows(queries, self.dim, "queries")
        k = min(k, len(self))
        if k == 0:
            empty = np.empty((q.shape[0], 0), dtype=np.float32)
            return wrap_results(empty, empty.astype(np.int64), queries)
        scores, ids = self._search(q, k)
        # IVF can return fewer than k hits when the probed lists are short: FAISS pads with -1.
        return wrap_results(scores, ids, queries)

    def _search(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if self.small_batch_threads is None or q.shape[0] >= SMALL_BATCH or self.use_gpu:
            return self._searcher().search(q, k)
        scans = self.native_scan and self.kind == "flat" and self.small_batch_threads == 1
        if scans and native_scan_available():
            return self._native_scan(q, k)
        previous = self._faiss.omp_get_max_threads()  # a per-thread OpenMP setting: restore it
        self._faiss.omp_set_num_threads(int(self.small_batch_threads))
        try:
            if q.shape[0] == 1:
                return self._searcher().search(q, k)
            with _blas_for_small_batches(self._faiss):  # one BLAS pass for the batch (class docs)
                return self._searcher().search(q, k)
        finally:
            self._faiss.omp_set_num_threads(previous)

    def _native_scan(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` of every stored vector for ``q [B, dim]`` by rotmem's scan (class docs)."""
        from rotmem.ops.native import top_inner_products

        n = self._index.ntotal
        flat = self._faiss.downcast_index(self._index.index)
        stored = self._faiss.rev_swig_ptr(flat.get_xb(), n * self.dim).reshape(n, self.dim)  # a view
        if self._int8 is None:
            self._int8 = Int8Rows(self.dim)
            self._int8.append(stored)
        if self._id_rows is None:
            self._id_rows = self._faiss.vector_to_array(self._index.id_map)
        arrays = (stored, *self._int8.arrays(), q)
        scores, rows = top_inner_products(*(torch.from_numpy(a) for a in arrays), k)
        return scores.numpy(), self._id_rows[rows.numpy()]

    def save(self, path: str) -> None:
        """Write the CPU index with ``faiss.write_index``."""
        index = self._index if self._index is not None else self._new_flat()
        self._faiss.write_index(index, path)

    @classmethod
    def load(cls, path: str, **options: Any) -> Self:
        """Read a file written by ``FaissIndex.save``; ``options`` as in the constructor (not ``kind``)."""
        faiss = import_faiss()
        cpu_index = faiss.read_index(path)
        is_ivf = faiss.try_extract_index_ivf(cpu_index) is not None
        index = cls(cpu_index.d, kind="ivf" if is_ivf else "flat", **options)
        index._index = cpu_index
        if is_ivf:
            ivf = faiss.extract_index_ivf(cpu_index)
            index.nlist = ivf.nlist
            ivf.nprobe = min(index.nprobe, ivf.nlist)
            stored = _ivf_ids(faiss, ivf)
        else:
            stored = faiss.vector_to_array(cpu_index.id_map)
        index._ids = set(stored.tolist())
        return index


@functools.cache
def native_scan_available() -> bool:
    """Whether rotmem's native CPU kernels (``rotmem._C``) are built here."""
    from rotmem.ops import native

    return native.is_available("cpu")


_blas_lock = threading.Lock()
_blas_users = [0, 0]  # searches inside _blas_for_small_batches, FAISS's threshold before the first


@contextmanager
def _blas_for_small_batches(faiss: Any) -> Iterator[None]:
    """FAISS's process-wide ``distance_compute_blas_threshold`` set to 1 while any search of this
    process needs it, restored when the last one ends (threads may search concurrently)."""
    with _blas_lock:
        if _blas_users[0] == 0:
            _blas_users[1] = faiss.cvar.distance_compute_blas_threshold
            faiss.cvar.distance_compute_blas_threshold = 1
        _blas_users[0] += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users[0] -= 1
            if _blas_users[0] == 0:
                faiss.cvar.distance_compute_blas_threshold = _blas_users[1]


def _ivf_ids(faiss: Any, ivf: Any) -> np.ndarray:
    """Every id stored in the inverted lists of ``ivf``."""
    lists = ivf.invlists
    parts = [
        faiss.rev_swig_ptr(lists.get_ids(i), lists.list_size(i)).copy()
        for i in range(ivf.nlist)
        if lists.list_size(i)
    ]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
