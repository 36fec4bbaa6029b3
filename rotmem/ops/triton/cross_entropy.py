"""``cross_entropy_all``: 1-vs-all cross-entropy over every entity, never holding ``[B, N]`` (Triton).

Forward: one kernel computes logits tile by tile (``tl.dot`` over entity tiles, float32
accumulation) and keeps an online log-sum-exp per row, ``m <- max(m, max_j z_j)``,
``l <- l * exp(m_old - m) + sum_j exp(z_j - m)``. Entity tiles are split across programs for
parallelism; a ``[B, splits]`` combine finishes ``lse``. Memory: ``O(B * splits)``.

Backward: entity chunks of ``C`` rows. For each, a kernel recomputes the chunk's logits and writes
``dz = (softmax(z) - onehot(target)) * dL/dloss`` into a ``[B, C]`` buffer; then
``dq += dz @ E_c`` and ``dE_c = dz^T @ q`` are two dense matmuls (cuBLAS on a GPU). Peak memory grows
with ``B * C``, not with ``B * N``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rotmem.ops.triton._common import (
    cast_for,
    check_float,
    check_index,
    check_same_device,
    dot_operand,
    is_fp64,
    kernel_op,
    launch,
    pow2,
)

# Elements of the backward's [B, C] gradient buffer: 2**24 floats = 64 MiB in float32.
CHUNK_ELEMENTS = 1 << 24
# Programs the forward aims for (rows blocks x entity splits): a few per streaming multiprocessor.
TARGET_PROGRAMS = 1024
REDUCTIONS = ("mean", "sum", "none")


@triton.jit
def _logits_tile(
    Qp, E, rows, cols, row_mask, col_mask, D: tl.constexpr, stride_q, stride_e,
    BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr,
    FP64: tl.constexpr,
):  # fmt: skip
    """``q[rows] @ E[cols]^T``: ``[BLOCK_B, BLOCK_N]`` in float32 (float64 for float64 inputs)."""
    if FP64:
        acc = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float64)
    else:
        acc = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, D, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_mask = ks < D
        q = tl.load(
            Qp + rows[:, None] * stride_q + ks[None, :], mask=row_mask[:, None] & k_mask[None, :], other=0.0
        )
        e = tl.load(
            E + cols[None, :] * stride_e + ks[:, None], mask=k_mask[:, None] & col_mask[None, :], other=0.0
        )
        acc += tl.dot(dot_operand(q), dot_operand(e), input_precision=PRECISION)
    return acc


@triton.jit
def _ce_forward_kernel(
    Qp, E, TARGET, PART_MAX, PART_SUM, PART_TARGET, B, N, stride_q, stride_e, splits,
    D: tl.constexpr, TILES_PER_SPLIT: tl.constexpr,
    BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr,
    FP64: tl.constexpr,
):  # fmt: skip
    split = tl.program_id(1)
    rows = (tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)
    row_mask = rows < B
    target = tl.load(TARGET + rows, mask=row_mask, other=-1)
    if FP64:
        running_max = tl.full((BLOCK_B,), float("-inf"), dtype=tl.float64)
        running_sum = tl.zeros((BLOCK_B,), dtype=tl.float64)
        target_logit = tl.zeros((BLOCK_B,), dtype=tl.float64)
    else:
        running_max = tl.full((BLOCK_B,), float("-inf"), dtype=tl.float32)
        running_sum = tl.zeros((BLOCK_B,), dtype=tl.float32)
        target_logit = tl.zeros((BLOCK_B,), dtype=tl.float32)
    tiles = tl.cdiv(N, BLOCK_N)
    # Loop bounds are constexpr: the compiler specialises on them, and the CPU interpreter cannot
    # take runtime bounds (with numpy >= 2.4).
    for step in range(0, TILES_PER_SPLIT):
        tile = split * TILES_PER_SPLIT + step
        if tile < tiles:  # the last split may hold fewer tiles; every tile holds a real entity
            cols = tile.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
            col_mask = cols < N
            z = _logits_tile(
                Qp, E, rows, cols, row_mask, col_mask, D, stride_q, stride_e,
                BLOCK_B, BLOCK_N, BLOCK_K, PRECISION, FP64,
            )  # fmt: skip
            z = tl.where(col_mask[None, :], z, float("-inf"))
            new_max = tl.maximum(running_max, tl.max(z, axis=1))
            running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(
                tl.exp(z - new_max[:, None]), axis=1
            )
            running_max = new_max
            target_logit += tl.sum(tl.where(cols[None, :] == target[:, None], z, 0.0), axis=1)
    part = rows * splits + split
    tl.store(PART_MAX + part, running_max, mask=row_mask)
    tl.store(PART_SUM + part, running_sum, mask=row_mask)
    tl.store(PART_TARGET + part, target_logit, mask=row_mask)


@triton.jit
def _ce_grad_logits_kernel(
    Qp, E, TARGET, LSE, GRAD_LOSS, DZ, B, first, count, stride_q, stride_e, stride_dz, D: tl.constexpr,
    BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PRECISION: tl.constexpr,
    FP64: tl.constexpr,
):  # fmt: skip
    """``dz[:, j] = (exp(z_j - lse) - [target == first + j]) * dL/dloss`` for ``j < count``."""
    rows = (tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)
    local = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < B
    col_mask = local < count
    cols = first + local.to(tl.int64)
    z = _logits_tile(
        Qp, E, rows, cols, row_mask, col_mask, D, stride_q, stride_e,
        BLOCK_B, BLOCK_N, BLOCK_K, PRECISION, FP64,
    )  # fmt: skip
    lse = tl.load(LSE + rows, mask=row_mask, other=0.0)
    grad_loss = tl.load(GRAD_LOSS + rows, mask=row_mask, other=0.0)
    target = tl.load(TARGET + rows, mask=row_mask, other=-1)
    p = tl.exp(z - lse[:, None])
    p = tl.where(cols[None, :] == target[:, None], p - 1.0, p)
    dz = p * grad_loss[:, None]
    mask = row_mask[:, None] & col_mask[None, :]
    tl.store(DZ + rows[:, None] * stride_dz + local[None, :], cast_for(dz, DZ), mask=mask)


def _precision(q: torch.Tensor) -> str:
    """``tl.dot`` input precision: float32 logits follow torch's TF32 switch, like ``q @ E.T`` does."""
    allow_tf32 = q.dtype == torch.float32 and q.is_cuda and torch.backends.cuda.matmul.allow_tf32
    return "tf32" if allow_tf32 else "ieee"


def _blocks(rows: int, entities: int, width: int) -> tuple[int, int, int]:
    # tl.dot needs every block dimension >= 16.
    return pow2(rows, low=16, high=64), pow2(entities, low=16, high=64), pow2(width, low=16, high=32)


@kernel_op("rotmem_triton::cross_entropy_all")
def _cross_entropy(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss [B], lse [B])`` with ``loss_b = lse_b - <q_b, e_target_b>`` over all ``N`` entities."""
    (rows, width), entities = q.shape, entity.shape[0]
    fp64 = is_fp64(q, entity)
    acc = torch.float64 if fp64 else torch.float32
    block_b, block_n, block_k = _blocks(rows, entities, width)
    row_blocks, tiles = triton.cdiv(rows, block_b), triton.cdiv(entities, block_n)
    tiles_per_split = triton.cdiv(tiles, min(tiles, max(1, triton.cdiv(TARGET_PROGRAMS, row_blocks))))
    splits = triton.cdiv(tiles, tiles_per_split)  # no split is left without a tile
    part_max = torch.empty((rows, splits), dtype=acc, device=q.device)
    part_sum = torch.empty((rows, splits), dtype=acc, device=q.device)
    part_target = torch.empty((rows, splits), dtype=acc, device=q.device)
    if rows:
        launch(
            _ce_forward_kernel, (row_blocks, splits), q, entity, target, part_max, part_sum, part_target,
            rows, entities, q.stride(0), entity.stride(0), splits, D=width, TILES_PER_SPLIT=tiles_per_split,
            BLOCK_B=block_b, BLOCK_N=block_n, BLOCK_K=block_k, PRECISION=_precision(q), FP64=fp64,
        )  # fmt: skip
    top = part_max.max(dim=1, keepdim=True).values
    lse = top.squeeze(1) + torch.log((part_sum * torch.exp(part_max - top)).sum(dim=1))
    return lse - part_target.sum(dim=1), lse


@kernel_op("rotmem_triton::cross_entropy_all_backward")
def _cross_entropy_backward(
    grad_loss: torch.Tensor,
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    lse: torch.Tensor,
    need_q: bool,
    need_entity: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dL/dq [B, 2n], dL/dentity [N, 2n])``, chunk by chunk of entities; unneeded ones are empty."""
    (rows, width), entities = q.shape, entity.shape[0]
    fp64 = is_fp64(q, entity)
    acc = torch.float64 if fp64 else torch.float32
    block_b, block_n, block_k = _blocks(rows, entities, width)
    chunk = min(entities, max(block_n, CHUNK_ELEMENTS // max(rows, 1) // block_n * block_n))
    grad_q = torch.zeros((rows, width) if need_q else (0,), dtype=acc, device=q.device)
    grad_e = torch.empty(entity.shape if need_entity else (0,), dtype=entity.dtype, device=q.device)
    dz = torch.empty((rows, chunk), dtype=q.dtype, device=q.device)
    for first in range(0, entities if rows and (need_q or need_entity) else 0, chunk):
        count = min(chunk, entities - first)
        launch(
            _ce_grad_logits_kernel, (triton.cdiv(rows, block_b), triton.cdiv(count, block_n)),
            q, entity, target, lse, grad_loss, dz, rows, first, count,
            q.stride(0), entity.stride(0), dz.stride(0), D=width,
            BLOCK_B=block_b, BLOCK_N=block_n, BLOCK_K=block_k, PRECISION=_precision(q), FP64=fp64,
        )  # fmt: skip
        dz_chunk, e_chunk = dz[:, :count], entity[first : first + count]
        if need_q:
            grad_q += (dz_chunk @ e_chunk).to(acc)
        if need_entity:
            grad_e[first : first + count] = dz_chunk.t() @ q
    if need_entity and not rows:
        grad_e.zero_()
    return grad_q.to(q.dtype), grad_e


def _setup_context(ctx, inputs, output) -> None:
    q, entity, target = inputs
    ctx.save_for_backward(q, entity, target, output[1])


def _backward(ctx, grad_loss: torch.Tensor, grad_lse: torch.Tensor):
    q, entity, target, lse = ctx.saved_tensors
    need_q, need_entity = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    grad_q, grad_e = _cross_entropy_backward(
        grad_loss.contiguous().to(lse.dtype), q, entity, target, lse, need_q, need_entity
    )
    return grad_q if need_q else None, grad_e if need_entity else None, None


_cross_entropy.register_autograd(_backward, setup_context=_setup_context)


def cross_entropy_all(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """1-vs-all cross-entropy of ``q [B, 2n]`` against all of ``entity [N, 2n]``, ``target [B]`` ids.

    Returns a float32 scalar (``"mean"``, ``"sum"``) or per-row losses ``[B]`` (``"none"``);
    float64 inputs give float64.
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    check_float("q", q)
    check_float("entity", entity)
    check_same_device(q=q, entity=entity, target=target)
    if q.dim() != 2 or entity.dim() != 2 or q.shape[1] != entity.shape[1]:
        raise ValueError(
            f"q [B, 2n] and entity [N, 2n] must share 2n, got {tuple(q.shape)} and {tuple(entity.shape)}"
        )
    if q.dtype != entity.dtype:
        raise ValueError(f"q ({q.dtype}) and entity ({entity.dtype}) must have the same dtype")
    if entity.shape[0] == 0:
        raise ValueError("entity is empty: cross-entropy needs at least one candidate")
    if target.shape != (q.shape[0],):
        raise ValueError(f"target must have shape ({q.shape[0]},) like q's rows, got {tuple(target.shape)}")
    check_index("target", target, entity.shape[0])
    if q.stride(-1) != 1:
        q = q.contiguous()
    if entity.stride(-1) != 1:
        entity = entity.contiguous()
    loss, _ = _cross_entropy(q, entity, target.contiguous())
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss
