"""``cross_entropy_all``: 1-vs-all cross-entropy over every entity, never holding ``[B, N]`` (Triton).

The design of Liger-Kernel's fused linear cross-entropy, and of the native driver
(``csrc/cross_entropy_driver.h``): the logits of one tile (``rotmem.ops.ce_tiles`` picks its rows
and entity columns) come from a dense product, ``q[rows] @ entity[cols]^T``, which cuBLAS runs at
the device's peak and under torch's TF32 switch exactly like the eager ``q @ E.T``; Triton kernels
then do the per-row work on the tile in place, one program per row:

- ``_lse_update_kernel``: merge the tile's (max, sum of exp) into the row's running summary
  (online log-sum-exp over entity chunks) and pick out the target's logit;
- ``_grad_kernel``: turn the tile into ``dL/dlogits = coef * (softmax - onehot(target))``;
- ``_lse_and_grad_kernel``: both at once, for a tile that holds every entity.

``dq`` and ``dentity`` are two more products of that tile. With gradients computed in the
forward (small tables, ``ce_tiles.grad_in_forward``) a training step costs three products; else
the forward keeps only each row's log-sum-exp and backward recomputes the tiles (four products).

Targets equal to ``IGNORE_INDEX`` (-100) are ignored, as in ``torch.nn.functional.cross_entropy``:
the row's loss is 0, it has no gradient, and ``"mean"`` divides by the number of other rows (nan
when every row is ignored).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rotmem.ops import ce_tiles
from rotmem.ops.triton._common import (
    cast_for,
    check_float,
    check_index,
    check_same_device,
    is_fp64,
    kernel_op,
    launch,
    pow2,
    upcast,
)

REDUCTIONS = ("mean", "sum", "none")
IGNORE_INDEX = -100  # as torch.nn.functional.cross_entropy
_IGNORE = tl.constexpr(IGNORE_INDEX)


@triton.jit
def _row_summary(ROW, COLS: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr):
    """``(m, s)``: max of the row's ``COLS`` logits and the sum of ``exp(logit - m)``."""
    offsets = tl.arange(0, BLOCK)
    z = upcast(tl.load(ROW + offsets, mask=offsets < COLS, other=float("-inf")), FP64)
    m = tl.max(z, axis=0)  # the first chunk always holds a logit: m is finite from here on
    s = tl.sum(tl.exp(z - m), axis=0)
    for start in range(BLOCK, COLS, BLOCK):
        cols = start + offsets
        z = upcast(tl.load(ROW + cols, mask=cols < COLS, other=float("-inf")), FP64)
        new_m = tl.maximum(m, tl.max(z, axis=0))
        s = s * tl.exp(m - new_m) + tl.sum(tl.exp(z - new_m), axis=0)
        m = new_m
    return m, s


@triton.jit
def _write_grad(ROW, target, lse, coef, COLS: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr):
    """Row ``<- coef * (exp(logit - lse) - [column == target])`` in place."""
    for start in range(0, COLS, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < COLS
        z = upcast(tl.load(ROW + cols, mask=mask, other=0.0), FP64)
        g = coef * tl.exp(z - lse)
        g = tl.where(cols == target, g - coef, g)
        tl.store(ROW + cols, cast_for(g, ROW), mask=mask)


@triton.jit
def _lse_update_kernel(
    TILE, TARGET, M, S, TGT, r0, c0,
    COLS: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    """Row ``r0 + i`` of the batch, tile row ``i``: fold entities ``[c0, c0 + COLS)`` into ``(M, S)``."""
    i = tl.program_id(0).to(tl.int64)
    row = r0 + i
    ROW = TILE + i * COLS
    m, s = _row_summary(ROW, COLS, BLOCK, FP64)
    run_m, run_s = tl.load(M + row), tl.load(S + row)
    new_m = tl.maximum(run_m, m)  # run_m is -inf before the first chunk: exp(-inf) = 0
    tl.store(S + row, run_s * tl.exp(run_m - new_m) + s * tl.exp(m - new_m))
    tl.store(M + row, new_m)
    local = tl.load(TARGET + row) - c0
    inside = (local >= 0) & (local < COLS)  # never for an ignored target (-100)
    target_logit = tl.load(ROW + local, mask=inside, other=0.0)
    tl.store(TGT + row, upcast(target_logit, FP64), mask=inside)


@triton.jit
def _grad_kernel(
    TILE, TARGET, LSE, COEF, r0, c0,
    COLS: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    """Tile row ``i`` (entities ``[c0, c0 + COLS)``) becomes ``dL/dlogits`` of batch row ``r0 + i``."""
    i = tl.program_id(0).to(tl.int64)
    row = r0 + i
    target = tl.load(TARGET + row) - c0
    _write_grad(TILE + i * COLS, target, tl.load(LSE + row), tl.load(COEF + row), COLS, BLOCK, FP64)


@triton.jit
def _lse_and_grad_kernel(
    TILE, TARGET, LSE, TGT, COEF, r0,
    COLS: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    """A tile row holding every entity: its log-sum-exp and target logit (0 for an ignored target),
    then ``dL/dlogits``."""
    i = tl.program_id(0).to(tl.int64)
    row = r0 + i
    ROW = TILE + i * COLS
    target = tl.load(TARGET + row)
    # The target logit is read first, and a barrier orders that read before any thread of the
    # program overwrites the row with its gradient (threads run the loops below out of step).
    target_logit = tl.load(ROW + target, mask=target != _IGNORE, other=0.0)
    tl.store(TGT + row, upcast(target_logit, FP64))
    tl.debug_barrier()
    m, s = _row_summary(ROW, COLS, BLOCK, FP64)
    lse = m + tl.log(s)
    tl.store(LSE + row, lse)
    _write_grad(ROW, target, lse, tl.load(COEF + row), COLS, BLOCK, FP64)


def _row_block(cols: int) -> int:
    return pow2(cols, low=16, high=2048)


def _acc_dtype(q: torch.Tensor, entity: torch.Tensor) -> torch.dtype:
    return torch.float64 if is_fp64(q, entity) else torch.float32


def _accumulate(
    total: torch.Tensor | None, a: torch.Tensor, b: torch.Tensor, acc: torch.dtype
) -> torch.Tensor:
    """``total + a @ b`` (``a @ b`` when ``total`` is None), summed in ``acc``."""
    if a.dtype == acc:
        return a @ b if total is None else torch.addmm(total, a, b)
    product = (a @ b).to(acc)  # bfloat16 products are rounded once, then summed in float32
    return product if total is None else total + product


def _gradient(parts: list[torch.Tensor], like: torch.Tensor, needed: bool) -> torch.Tensor:
    """The gradient for ``like`` from its parts in row order; zeros when no row contributed (an
    empty batch), an empty tensor when it is not needed."""
    if not needed:
        return like.new_zeros(0)
    return torch.cat(parts).to(like.dtype) if parts else torch.zeros_like(like)


@kernel_op("rotmem_triton::cross_entropy_all")
def _cross_entropy(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, block_rows: int, block_cols: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss [B], lse [B])`` with ``loss_b = lse_b - <q_b, e_target_b>`` (0 where ``target_b`` is
    ignored), tile by tile."""
    (batch, _), entities = q.shape, entity.shape[0]
    fp64, acc = is_fp64(q, entity), _acc_dtype(q, entity)
    run_m = torch.full((batch,), float("-inf"), dtype=acc, device=q.device)
    run_s = torch.zeros((batch,), dtype=acc, device=q.device)
    target_logit = torch.zeros((batch,), dtype=acc, device=q.device)
    for r0 in range(0, batch, block_rows):
        q_rows = q[r0 : r0 + block_rows]
        for c0 in range(0, entities, block_cols):
            tile = q_rows @ entity[c0 : c0 + block_cols].t()
            launch(
                _lse_update_kernel, (tile.shape[0],), tile, target, run_m, run_s, target_logit, r0, c0,
                COLS=tile.shape[1], BLOCK=_row_block(tile.shape[1]), FP64=fp64,
            )  # fmt: skip
    lse = run_m + torch.log(run_s)
    return torch.where(target == IGNORE_INDEX, 0.0, lse - target_logit), lse


@kernel_op("rotmem_triton::cross_entropy_all_backward")
def _cross_entropy_backward(
    grad_rows: torch.Tensor,
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    lse: torch.Tensor,
    block_rows: int,
    block_cols: int,
    need_q: bool,
    need_entity: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dL/dq [B, 2n], dL/dentity [N, 2n])`` for ``grad_rows [B] = dL/dloss_b``, recomputing each
    tile's logits; ignored rows contribute nothing; the gradients not needed are empty."""
    batch, entities = q.shape[0], entity.shape[0]
    grad_rows = grad_rows.contiguous().to(lse.dtype).masked_fill(target == IGNORE_INDEX, 0.0)
    fp64, acc = is_fp64(q, entity), _acc_dtype(q, entity)
    q_parts: list[torch.Tensor] = []
    e_parts: list[torch.Tensor | None] = [None] * triton.cdiv(entities, block_cols)
    for r0 in range(0, batch if need_q or need_entity else 0, block_rows):
        q_rows, q_part = q[r0 : r0 + block_rows], None
        for chunk, c0 in enumerate(range(0, entities, block_cols)):
            e_chunk = entity[c0 : c0 + block_cols]
            tile = q_rows @ e_chunk.t()
            launch(
                _grad_kernel, (tile.shape[0],), tile, target, lse, grad_rows, r0, c0,
                COLS=tile.shape[1], BLOCK=_row_block(tile.shape[1]), FP64=fp64,
            )  # fmt: skip
            if need_q:
                q_part = _accumulate(q_part, tile, e_chunk, acc)
            if need_entity:
                e_parts[chunk] = _accumulate(e_parts[chunk], tile.t(), q_rows, acc)
        if need_q:
            q_parts.append(q_part)
    return _gradient(q_parts, q, need_q), _gradient(e_parts if batch else [], entity, need_entity)


@kernel_op("rotmem_triton::cross_entropy_all_train")
def _cross_entropy_train(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    reduction: str,
    block_rows: int,
    need_q: bool,
    need_entity: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(loss, dloss/dq, dloss/dentity)`` in one sweep of row blocks whose tiles hold every entity
    (three products per block); ``reduction`` is ``"mean"`` or ``"sum"``. Shapes: ``loss []``,
    ``dloss/dq [B, 2n]``, ``dloss/dentity [N, 2n]`` (empty when not needed)."""
    batch, entities = q.shape[0], entity.shape[0]
    fp64, acc = is_fp64(q, entity), _acc_dtype(q, entity)
    valid = target != IGNORE_INDEX
    count = valid.sum()
    coef = valid.to(acc)  # each row's weight in the loss; no row counts when all are ignored
    if reduction == "mean":
        coef = coef / count.clamp_min(1)
    lse = torch.empty((batch,), dtype=acc, device=q.device)
    target_logit = torch.empty((batch,), dtype=acc, device=q.device)
    q_parts: list[torch.Tensor] = []
    grad_entity = None
    for r0 in range(0, batch, block_rows):
        q_rows = q[r0 : r0 + block_rows]
        tile = q_rows @ entity.t()
        launch(
            _lse_and_grad_kernel, (tile.shape[0],), tile, target, lse, target_logit, coef, r0,
            COLS=entities, BLOCK=_row_block(entities), FP64=fp64,
        )  # fmt: skip
        if need_q:
            q_parts.append(tile @ entity)
        if need_entity:
            grad_entity = _accumulate(grad_entity, tile.t(), q_rows, acc)
    loss = torch.where(valid, lse - target_logit, 0.0).sum()
    if reduction == "mean":
        loss = loss / count  # nan when every row is ignored, as in torch
    e_parts = [] if grad_entity is None else [grad_entity]
    return loss, _gradient(q_parts, q, need_q), _gradient(e_parts, entity, need_entity)


def cross_entropy_all_train_backward(
    grad: torch.Tensor, grad_q: torch.Tensor, grad_entity: torch.Tensor, need_q: bool, need_entity: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The gradients ``cross_entropy_all_train`` made in its forward, times the loss's gradient
    (its ``Gradient`` in ``rotmem.ops.registry``)."""
    return (
        grad_q * grad.to(grad_q.dtype) if need_q else None,
        grad_entity * grad.to(grad_entity.dtype) if need_entity else None,
    )


def cross_entropy_all(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """1-vs-all cross-entropy of ``q [B, 2n]`` against all of ``entity [N, 2n]``, ``target [B]`` ids.

    Returns a float32 scalar (``"mean"``, ``"sum"``) or per-row losses ``[B]`` (``"none"``);
    float64 inputs give float64. Targets equal to -100 are ignored, as in
    ``torch.nn.functional.cross_entropy``: their loss is 0 with no gradient, ``"mean"`` averages
    over the other rows (nan when there are none); any other id outside ``[0, N)`` raises.
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
    check_index(
        "cross_entropy_all", "target", target, entity.shape[0], "the entity table", ignore=IGNORE_INDEX
    )
    q, entity, target = q.contiguous(), entity.contiguous(), target.long().contiguous()
    rows, cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])
    need_q = q.requires_grad and torch.is_grad_enabled()
    need_entity = entity.requires_grad and torch.is_grad_enabled()
    # one sweep computes the gradients only when a tile holds every entity
    whole_rows = cols == entity.shape[0]
    if (need_q or need_entity) and reduction != "none" and whole_rows and ce_tiles.grad_in_forward(entity):
        loss, _, _ = _cross_entropy_train(q, entity, target, reduction, rows, need_q, need_entity)
        return loss
    loss, _ = _cross_entropy(q, entity, target, rows, cols)
    if reduction == "mean":
        return loss.sum() / (target != IGNORE_INDEX).sum()
    return loss.sum() if reduction == "sum" else loss
