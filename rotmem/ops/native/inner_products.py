"""``inner_products`` on the native CPU kernel (``csrc/cpu/inner_products.cpp``): the scan of an exact
flat search for a handful of queries (``rotmem.index.FaissIndex`` uses it for fewer than
``SMALL_BATCH`` queries). Its reference is ``rotmem.ops.reference.inner_products``; it has no
gradient (a search, not a training op) and no CUDA kernel (on a GPU, a matrix product is the fast way).
"""

from __future__ import annotations

import torch


def inner_products(vectors: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """``[B, N]`` float32 scores ``queries [B, D] · vectors [N, D]ᵀ`` on the CPU, one thread, each
    score computed alike wherever it sits in the batch (a batch gives what each query gives alone)."""
    if vectors.device.type != "cpu" or queries.device.type != "cpu":
        raise ValueError(f"inner_products runs on the CPU, got {vectors.device} and {queries.device}")
    return torch.ops.rotmem.inner_products(vectors, queries)


def inner_products_fake(vectors: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
    """The op's shape function (``torch.library.register_fake``)."""
    return vectors.new_empty((queries.shape[0], vectors.shape[0]))
