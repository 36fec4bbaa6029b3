"""How the fused 1-vs-all cross-entropy cuts ``[B, N]`` logits into tiles (native and Triton backends).

Neither backend holds the ``[B, N]`` logits: both work on tiles of at most ``CE_TILE_ELEMENTS``
logits (env ``ROTMEM_CE_TILE_ELEMENTS``, default 2**23, i.e. 32 MiB in float32), each made by one
dense product ``q[rows] @ entity[cols]^T`` (BLAS on the CPU, cuBLAS on a GPU).

When gradients are needed (grad mode on, ``q`` or ``entity`` requiring grad, reduction ``"mean"``
or ``"sum"``) and the entity table is small, the forward pass also computes them, tile by tile,
and backward only scales them by the output gradient: one sweep of three matrix products instead
of a forward and a backward sweep of four. The price is a second ``[N, 2n]`` gradient (the one
held from the forward and its scaled copy), so for tables larger than
``CE_GRAD_IN_FORWARD_MAX_BYTES`` (256 MiB of gradient, e.g. N = 128k at 2n = 500) backward instead
recomputes the logits tile by tile from the saved per-row log-sum-exp, and peak memory is one
entity gradient plus one tile. ``ROTMEM_CE_GRAD_IN_FORWARD=1`` / ``0`` forces either way.

Rounding: gradients made in the forward sweep are rounded to the inputs' dtype there, before backward
scales them by the output gradient, while backward's sweep (like the eager reference) scales first:
in bfloat16, one rounding more (at most 2^-8 relative) when the output gradient is not 1. A training
loss that is the cross-entropy itself (plus other terms) has output gradient 1, which scales exactly.
"""

from __future__ import annotations

import os

import torch

CE_TILE_ELEMENTS = int(os.environ.get("ROTMEM_CE_TILE_ELEMENTS", 1 << 23))
# None: decide by the size of the entity gradient; True / False: always / never in the forward.
CE_GRAD_IN_FORWARD: bool | None = {"1": True, "0": False}.get(os.environ.get("ROTMEM_CE_GRAD_IN_FORWARD", ""))
CE_GRAD_IN_FORWARD_MAX_BYTES = 256 * 2**20
CE_MIN_BLOCK_ROWS = 256  # fewer rows per matrix product than this wastes the BLAS kernels


def cross_entropy_blocks(batch: int, num_entities: int) -> tuple[int, int]:
    """``(block_rows, block_cols)`` of the logit tiles for a ``[batch, num_entities]`` problem.

    A tile has at most ``CE_TILE_ELEMENTS`` logits. Whole rows (every entity) when at least
    ``CE_MIN_BLOCK_ROWS`` of them fit (one pass per row block), else ``CE_MIN_BLOCK_ROWS`` rows and
    entity chunks (online log-sum-exp). Blocks and chunks are balanced so none is a small remnant.
    """
    budget = max(1, CE_TILE_ELEMENTS)
    batch, num_entities = max(1, batch), max(1, num_entities)
    rows = budget // num_entities
    if rows >= batch:
        return batch, num_entities
    rows = max(rows, min(batch, CE_MIN_BLOCK_ROWS))
    rows = -(-batch // -(-batch // rows))
    cols = min(num_entities, max(1, budget // rows))
    cols = -(-num_entities // -(-num_entities // cols))
    return rows, cols


def grad_in_forward(entity: torch.Tensor) -> bool:
    """Whether the fused cross-entropy computes its gradients in the forward sweep (see above)."""
    if CE_GRAD_IN_FORWARD is not None:
        return CE_GRAD_IN_FORWARD
    itemsize = 8 if entity.dtype == torch.float64 else 4  # gradients accumulate in float32 or float64
    return entity.numel() * itemsize <= CE_GRAD_IN_FORWARD_MAX_BYTES
