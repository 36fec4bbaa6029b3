"""The 1-vs-all cross-entropy as chunked dense products (cuBLAS on a GPU, BLAS on the CPU), with the
softmax gradient written in place between them: the CUDA path of ``cross_entropy_all``.

The design is that of Liger-Kernel's fused linear cross-entropy (written anew for this op). Per chunk
of query rows ``c`` (whole rows: every entity):

1. ``logits = q[c] @ entity^T`` (product 1), rounded to the inputs' dtype as the reference does;
2. ``lse = logsumexp(logits)`` in float32, ``loss[c] = lse - logits[c, target]``;
3. when gradients are wanted and the loss is reduced (``mean``/``sum``): the logits buffer becomes
   ``dL/dlogits = (softmax(logits) - onehot(target)) * scale`` in place (no second ``[rows, N]``
   buffer), then ``grad_q[c] = dlogits @ entity`` (product 2) and ``grad_entity += dlogits^T @ q[c]``
   (product 3).

So a training step runs three products and a few elementwise passes over one chunk of logits, and
backward only scales the saved gradients by the output gradient (a tensor multiply: no host sync).
Without gradients in the forward (reduction ``none``, or a table whose gradient is larger than
``ce_tiles.CE_GRAD_IN_FORWARD_MAX_BYTES``), backward recomputes each chunk's logits from the saved
``lse`` (four products). The mean's divisor is the count of targets that are not ignored (-100),
kept on the device.

Chunks: ``rows = ROWS_BUDGET // N`` query rows at a time (at least 1), ``ROWS_BUDGET`` logits per
chunk: 2^25 (128 MiB of float32) on a GPU, ``ce_tiles.CE_TILE_ELEMENTS`` on the CPU. The ICEWS05-15
step (2,000 queries x 10,488 entities) is one chunk on a GPU: three cuBLAS calls.

Rounding (what the tests' bounds count): in bfloat16 the gradients are made as the reference's
autograd makes them (``dlogits`` rounded to bfloat16 before products 2 and 3), but ``grad_entity``
sums its chunks in float32 and rounds once more at the end (one rounding more than the reference,
at most 2^-8 relative), and a forward-made gradient scaled by an output gradient other than 1 is one
rounding more again.
"""

from __future__ import annotations

import torch

from rotmem.ops import ce_tiles
from rotmem.ops.id_checks import check_ids

IGNORE_INDEX = -100
REDUCTIONS = ("mean", "sum", "none")
CUDA_ROWS_BUDGET = 1 << 25  # logits per chunk on a GPU: 128 MiB of float32


def rows_per_chunk(batch: int, num_entities: int, device: torch.device) -> int:
    """Query rows per chunk of ``[rows, num_entities]`` logits (see the module docstring)."""
    budget = CUDA_ROWS_BUDGET if device.type == "cuda" else ce_tiles.CE_TILE_ELEMENTS
    return max(1, min(max(batch, 1), budget // max(num_entities, 1)))


def _acc(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _loss_chunk(q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, valid: torch.Tensor):
    """``(logits [c, N] acc dtype, lse [c], loss [c])`` of one chunk; ignored rows' loss is 0."""
    logits = torch.mm(q, entity.t()).to(_acc(q.dtype))  # rounded to q's dtype first, as the reference
    lse = torch.logsumexp(logits, dim=1)
    picked = logits.gather(1, target.clamp(min=0).unsqueeze(1)).squeeze(1)
    return logits, lse, torch.where(valid, lse - picked, torch.zeros_like(lse))


def _dlogits_(logits: torch.Tensor, lse: torch.Tensor, target: torch.Tensor, row_scale: torch.Tensor):
    """``logits`` becomes ``(softmax - onehot(target)) * row_scale[:, None]`` in place."""
    logits.sub_(lse.unsqueeze(1)).exp_()
    logits.scatter_add_(1, target.clamp(min=0).unsqueeze(1), -torch.ones_like(logits[:, :1]))
    return logits.mul_(row_scale.unsqueeze(1))


def _scale(target: torch.Tensor, reduction: str, acc: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """``(valid [B] bool, row_scale [B])``: each row's factor of d(loss)/d(row loss), 0 if ignored."""
    valid = target != IGNORE_INDEX
    row_scale = valid.to(acc)
    if reduction == "mean":
        row_scale = row_scale / valid.sum().clamp(min=1).to(acc)
    return valid, row_scale


def _reduce(loss: torch.Tensor, valid: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "none":
        return loss
    total = loss.sum()
    return total / valid.sum().to(total.dtype) if reduction == "mean" else total


class _GradInForward(torch.autograd.Function):
    """Loss and both gradients in one sweep; backward scales the saved gradients."""

    @staticmethod
    def forward(ctx, q, entity, target, reduction, need_q, need_entity):
        acc = _acc(q.dtype)
        valid, row_scale = _scale(target, reduction, acc)
        rows = rows_per_chunk(q.shape[0], entity.shape[0], q.device)
        losses = []
        grad_q = torch.empty_like(q) if need_q else None
        grad_entity = torch.zeros(entity.shape, dtype=acc, device=entity.device) if need_entity else None
        for start in range(0, q.shape[0], rows):
            end = min(start + rows, q.shape[0])
            q_c, t_c = q[start:end], target[start:end]
            logits, lse, loss = _loss_chunk(q_c, entity, t_c, valid[start:end])
            losses.append(loss)
            dlogits = _dlogits_(logits, lse, t_c, row_scale[start:end]).to(q.dtype)
            if need_q:
                torch.mm(dlogits, entity, out=grad_q[start:end])
            if need_entity:
                grad_entity.add_(torch.mm(dlogits.t(), q_c))  # chunks summed in float32
        loss = _reduce(torch.cat(losses), valid, reduction)
        if grad_entity is not None:
            grad_entity = grad_entity.to(entity.dtype)
        ctx.save_for_backward(grad_q, grad_entity)
        ctx.set_materialize_grads(False)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        grad_q, grad_entity = ctx.saved_tensors
        if grad_loss is None:
            return None, None, None, None, None, None
        scale = grad_loss.to(grad_q.dtype if grad_q is not None else grad_entity.dtype)
        return (
            None if grad_q is None else grad_q * scale,
            None if grad_entity is None else grad_entity * scale,
            None,
            None,
            None,
            None,
        )


class _Recompute(torch.autograd.Function):
    """Loss in the forward (``lse`` saved); backward recomputes each chunk's logits."""

    @staticmethod
    def forward(ctx, q, entity, target, reduction):
        valid = target != IGNORE_INDEX
        rows = rows_per_chunk(q.shape[0], entity.shape[0], q.device)
        losses, lses = [], []
        for start in range(0, q.shape[0], rows):
            end = min(start + rows, q.shape[0])
            _, lse, loss = _loss_chunk(q[start:end], entity, target[start:end], valid[start:end])
            losses.append(loss)
            lses.append(lse)
        ctx.save_for_backward(q, entity, target, torch.cat(lses))
        ctx.reduction = reduction
        return _reduce(torch.cat(losses), valid, reduction)

    @staticmethod
    def backward(ctx, grad_loss):
        q, entity, target, lse = ctx.saved_tensors
        need_q, need_entity = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        acc = _acc(q.dtype)
        valid, row_scale = _scale(target, ctx.reduction, acc)
        row_scale = row_scale * grad_loss.to(acc)  # [B] for "none", a scalar otherwise
        rows = rows_per_chunk(q.shape[0], entity.shape[0], q.device)
        grad_q = torch.empty_like(q) if need_q else None
        grad_entity = torch.zeros(entity.shape, dtype=acc, device=entity.device) if need_entity else None
        for start in range(0, q.shape[0], rows):
            end = min(start + rows, q.shape[0])
            q_c, t_c = q[start:end], target[start:end]
            logits = torch.mm(q_c, entity.t()).to(acc)
            dlogits = _dlogits_(logits, lse[start:end], t_c, row_scale[start:end]).to(q.dtype)
            if need_q:
                torch.mm(dlogits, entity, out=grad_q[start:end])
            if need_entity:
                grad_entity.add_(torch.mm(dlogits.t(), q_c))
        if grad_entity is not None:
            grad_entity = grad_entity.to(entity.dtype)
        return grad_q, grad_entity, None, None


def check_inputs(q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str) -> None:
    """One-line errors for bad shapes, dtypes and out-of-range targets (``rotmem.ops.id_checks``:
    on a GPU one 16-byte readback, which a training step skips: ``id_checks.unchecked_on_device``)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"cross_entropy_all: unknown reduction {reduction!r}; expected one of {REDUCTIONS}")
    if q.dim() != 2 or entity.dim() != 2 or q.shape[1] != entity.shape[1]:
        raise ValueError(
            f"cross_entropy_all: expected q [B, D] and entity [N, D], got {tuple(q.shape)} and "
            f"{tuple(entity.shape)}"
        )
    if q.dtype != entity.dtype or not q.is_floating_point():
        raise ValueError(
            f"cross_entropy_all: q ({q.dtype}) and entity ({entity.dtype}) must share a float dtype"
        )
    if target.shape != (q.shape[0],) or target.dtype not in (torch.int64, torch.int32):
        raise ValueError(
            f"cross_entropy_all: target must be int64 [{q.shape[0]}], got {target.dtype} "
            f"{tuple(target.shape)}"
        )
    if q.device != entity.device or q.device != target.device:
        raise ValueError(
            f"cross_entropy_all: q, entity and target must be on one device, got {q.device}, "
            f"{entity.device}, {target.device}"
        )
    check_ids("cross_entropy_all", "target", target, entity.shape[0], ignore=IGNORE_INDEX)


def linear_cross_entropy(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """``rotmem.ops.reference.cross_entropy_all`` by chunked products: float32 (float64 for float64
    inputs), ``[]`` or ``[B]`` for ``reduction="none"``. Targets equal to -100 are ignored."""
    check_inputs(q, entity, target, reduction)
    target = target.long()
    need_q = q.requires_grad and torch.is_grad_enabled()
    need_entity = entity.requires_grad and torch.is_grad_enabled()
    if (need_q or need_entity) and reduction != "none" and ce_tiles.grad_in_forward(entity):
        return _GradInForward.apply(q, entity, target, reduction, need_q, need_entity)
    return _Recompute.apply(q, entity, target, reduction)
