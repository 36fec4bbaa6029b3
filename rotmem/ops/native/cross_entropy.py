"""``cross_entropy_all`` on the native kernels (``csrc/cross_entropy_driver.h``, per-device tile
kernels in ``csrc/{cpu,cuda}/cross_entropy.*``); its fakes and gradients are
``rotmem.ops.registry``'s. It never
holds the ``[B, N]`` logits; how it tiles them, and when it computes its gradients in the forward
sweep, is ``rotmem.ops.ce_tiles``. On CUDA tensors ``cross_entropy_all`` runs cuBLAS products
instead (``rotmem.ops.linear_cross_entropy``)."""

from __future__ import annotations

import torch

from rotmem.host_syncs import cpu_only
from rotmem.ops import ce_tiles
from rotmem.ops.linear_cross_entropy import linear_cross_entropy
from rotmem.ops.table_grad import is_traced

REDUCTIONS = ("mean", "sum", "none")


def cross_entropy_all(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """``rotmem.ops.reference.cross_entropy_all``: float32 (float64 for float64 inputs). Targets
    equal to -100 are ignored, as in ``torch.nn.functional.cross_entropy``.

    On the CPU the fused, tiled kernel; on CUDA cuBLAS products in chunks with the softmax gradient
    written in place between them (``rotmem.ops.linear_cross_entropy``): a hand-written float32
    product does not beat cuBLAS, and the tiled CUDA kernel stays reachable as
    ``cross_entropy_tiled`` (the sharded cross-entropy's pieces use it)."""
    if q.is_cuda:
        return linear_cross_entropy(q, entity, target, reduction)
    if q.dim() != 2 or entity.dim() != 2:
        raise ValueError(
            f"expected q [B, D] and entity [N, D], got {tuple(q.shape)} and {tuple(entity.shape)}"
        )
    block_rows, block_cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])
    return cross_entropy_tiled(q, entity, target, reduction, block_rows, block_cols)


def cross_entropy_tiled(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    reduction: str,
    block_rows: int,
    block_cols: int,
) -> torch.Tensor:
    """``cross_entropy_all`` with explicit tiles of ``block_rows x block_cols`` logits."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"unknown reduction {reduction!r}; expected one of {REDUCTIONS}")
    if q.dtype != entity.dtype:
        raise ValueError(f"q dtype {q.dtype} differs from entity dtype {entity.dtype}")
    target = target.long()
    need_q = q.requires_grad and torch.is_grad_enabled()
    need_entity = entity.requires_grad and torch.is_grad_enabled()
    if (need_q or need_entity) and reduction != "none" and ce_tiles.grad_in_forward(entity):
        loss, _, _ = torch.ops.rotmem.cross_entropy_all_train(
            q, entity, target, reduction, block_rows, block_cols, need_q, need_entity
        )
        return loss
    loss, _ = torch.ops.rotmem.cross_entropy_all(q, entity, target, reduction, block_rows, block_cols)
    return loss


def _times(grad: torch.Tensor, grad_loss: torch.Tensor) -> torch.Tensor:
    """``grad * grad_loss``, skipping the pass over ``grad`` (an ``[N, 2n]`` table) in eager CPU
    code when the output gradient is exactly 1, as it is for a loss that is the CE itself."""
    if not is_traced(grad_loss) and grad_loss.device.type == "cpu":
        with cpu_only():
            if grad_loss.item() == 1.0:
                return grad
    return grad * grad_loss


def cross_entropy_all_train_backward(
    grad: torch.Tensor, grad_q: torch.Tensor, grad_entity: torch.Tensor, need_q: bool, need_entity: bool
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The gradients ``cross_entropy_all_train`` made in its forward, times the loss's gradient
    (its ``Gradient`` in ``rotmem.ops.registry``)."""
    return _times(grad_q, grad) if need_q else None, _times(grad_entity, grad) if need_entity else None
