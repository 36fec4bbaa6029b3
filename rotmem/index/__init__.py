"""Inner-product search: FAISS (flat or IVF, GPU when faiss-gpu sees one) or exact torch.

>>> index = make_index(dim=384)            # FAISS flat when installed, else torch
>>> index.add(ids, vectors)                # ids [n] int64 ≥ 0, vectors [n, 384] float32
>>> scores, ids = index.search(queries, k=15)

``EntityIndex.from_model(model)`` serves RoMem's temporal entity queries from one static index.
"""

from rotmem.index.base import InnerProductIndex
from rotmem.index.entity import EntityIndex
from rotmem.index.factory import load_index, make_index, resolve_backend
from rotmem.index.faiss_index import FaissIndex, faiss_available, faiss_gpu_available
from rotmem.index.torch_index import TorchIndex

__all__ = [
    "EntityIndex",
    "FaissIndex",
    "InnerProductIndex",
    "TorchIndex",
    "faiss_available",
    "faiss_gpu_available",
    "load_index",
    "make_index",
    "resolve_backend",
]
