"""Choosing an index backend, and reopening a saved index of either kind."""

from __future__ import annotations

from typing import Any

import torch

from rotmem.index.base import InnerProductIndex
from rotmem.index.faiss_index import FaissIndex, faiss_available, faiss_gpu_available, import_faiss
from rotmem.index.torch_index import TorchIndex

BACKENDS = ("auto", "faiss", "torch")
_ZIP_MAGIC = b"PK"  # torch.save writes a zip archive; faiss.write_index does not


def resolve_backend(backend: str = "auto", device: str | torch.device | None = None) -> str:
    """``"faiss"`` or ``"torch"`` for a requested ``backend`` and vector ``device``.

    ``"auto"``: FAISS when installed, except for a CUDA ``device`` without faiss-gpu (then the
    exact torch path, which keeps the vectors on that device). ``"faiss"`` without FAISS raises an
    ImportError naming ``pip install faiss-cpu``.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown index backend {backend!r}; expected one of {BACKENDS}")
    if backend == "faiss":
        import_faiss()
        return "faiss"
    if backend == "torch" or not faiss_available():
        return "torch"
    on_cuda = device is not None and torch.device(device).type == "cuda"
    return "torch" if on_cuda and not faiss_gpu_available() else "faiss"


def make_index(
    dim: int,
    backend: str = "auto",
    kind: str = "flat",
    device: str | torch.device | None = None,
    **options: Any,
) -> InnerProductIndex:
    """A new empty index of width ``dim``.

    ``kind="flat"`` (exact, default) or ``"ivf"`` (FAISS only; for ≥ 1M vectors). ``device``:
    where vectors live for the torch backend (a CUDA device keeps them there), or ``"cpu"`` /
    ``"cuda"`` for FAISS (default: GPU when faiss-gpu sees one). ``options`` go to the class
    (``FaissIndex``: ``nlist``, ``nprobe``, ``num_threads``; ``TorchIndex``: ``row_chunk``,
    ``query_chunk``).
    """
    chosen = resolve_backend(backend, device)
    if chosen == "torch":
        if kind != "flat":
            raise ValueError(f"kind={kind!r} needs FAISS (pip install faiss-cpu); the torch index is flat")
        return TorchIndex(dim, device=device, **options)
    faiss_device = "auto" if device is None else torch.device(device).type
    return FaissIndex(dim, kind=kind, device=faiss_device, **options)


def load_index(path: str, **options: Any) -> InnerProductIndex:
    """Reopen an index written by ``save``: a torch file as ``TorchIndex``, else as ``FaissIndex``."""
    with open(path, "rb") as handle:
        magic = handle.read(2)
    cls = TorchIndex if magic == _ZIP_MAGIC else FaissIndex
    return cls.load(path, **options)
