"""``top_inner_products`` on the native CPU kernel (``csrc/cpu/top_inner_products.cpp``): each
query's top ``k`` stored rows by the exact scores of ``inner_products``, found by reading an int8
copy of the rows (``rotmem.index.int8_rows.Int8Rows``) and rescoring the few rows it cannot rule
out. Its reference is ``rotmem.ops.reference.top_inner_products``; no gradient, no CUDA kernel.
"""

from __future__ import annotations

import torch


def top_inner_products(
    vectors: torch.Tensor,
    codes: torch.Tensor,
    scales: torch.Tensor,
    errors: torch.Tensor,
    norms: torch.Tensor,
    queries: torch.Tensor,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scores [B, k'], rows [B, k'])``, ``k' = min(k, N)``: for each of ``queries [B, D]`` the
    ``k'`` rows of ``vectors [N, D]`` (float32, finite) with the largest inner products, best first,
    equal scores in row order; the scores are those ``inner_products`` gives, bit for bit.
    ``codes [N, D]`` (int8), ``scales``, ``errors`` and ``norms`` (``[N]`` float32) are the rows'
    int8 copy (``rotmem.index.int8_rows.quantise``): ``errors[r] >= |x_r - scales[r] codes[r]|``
    and ``norms[r] >= |x_r|``, or rows may be missed. CPU, one thread."""
    tensors = (vectors, codes, scales, errors, norms, queries)
    if any(t.device.type != "cpu" for t in tensors):
        raise ValueError(f"top_inner_products runs on the CPU, got {[str(t.device) for t in tensors]}")
    return torch.ops.rotmem.top_inner_products(vectors, codes, scales, errors, norms, queries, int(k))


def top_inner_products_fake(
    vectors: torch.Tensor,
    codes: torch.Tensor,
    scales: torch.Tensor,
    errors: torch.Tensor,
    norms: torch.Tensor,
    queries: torch.Tensor,
    k: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The op's shape function (``torch.library.register_fake``)."""
    k = min(k, vectors.shape[0])
    shape = (queries.shape[0], k)
    return vectors.new_empty(shape), vectors.new_empty(shape, dtype=torch.int64)
