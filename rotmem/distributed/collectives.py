"""Collectives with the gradients of tensor parallelism (Megatron-LM's regions), over ``group``.

A tensor every rank computes identically (replicated) is the input of shard-local work and the
output of a sum over shards; these functions say how gradients cross that boundary.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


class _SumOverShards(torch.autograd.Function):
    """Forward: the sum of every rank's ``x``. Backward: the gradient as it is (every rank holds the
    same loss of the sum, so each rank's part gets that loss's gradient)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        out = x.clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


class _IntoShards(torch.autograd.Function):
    """Forward: ``x`` as it is (replicated). Backward: the sum of every rank's gradient (each rank's
    shard-local work gave only its shard's part)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


def sum_over_shards(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``Σ_ranks x`` on every rank; its gradient reaches each rank's ``x`` unchanged."""
    return _SumOverShards.apply(x, group)


def into_shards(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``x`` (replicated) entering shard-local work; its gradient is summed over ranks."""
    return _IntoShards.apply(x, group)


def gather_from_ranks(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """``[world, *x.shape]``: every rank's ``x`` (same shape on all), in rank order, on every rank.

    Differentiable in this rank's own slice only, the others are constants here: each rank
    differentiates the same replicated loss, so its own ``x`` gets the full gradient.
    """
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.detach().contiguous(), group=group)
    parts[dist.get_rank(group)] = x
    return torch.stack(parts)


def all_gather_rows(x: torch.Tensor, group: dist.ProcessGroup | None = None) -> torch.Tensor:
    """Every rank's ``x [m, ...]`` (same ``m`` on all) concatenated in rank order (no gradient)."""
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts)
