"""The 1-vs-all cross-entropy over an entity table whose rows are sharded across ranks.

The vocab-parallel cross-entropy of Megatron-LM and of cut-cross-entropy's ``VocabParallelOptions``:
every rank holds the same queries ``q [B, D]`` and its rows ``E_r`` of the table. Each computes, with
the fused tiled kernels (never ``[B, N_r]``), its shard's log-sum-exp per query, and the target's
logit where it owns the target. An all-gather of the ``[B]`` log-sum-exps (combined by a stable
log-sum-exp, in rank order, so every rank gets the same numbers) and an all-reduce of the target
logits give every rank the loss of each query. Backward runs the fused kernels' gradient sweep with
the global log-sum-exp: ``dL/dl = g (softmax - onehot)`` on the shard's columns, so the table's
gradient stays on the rank that owns its rows; the queries' partial gradients are summed over ranks.

The backends' backward kernels only know targets inside the table they see. A query whose target
lives on another rank is given target 0 of this shard, and what that took off (``g · onehot(0)``)
is put back afterwards: one row of ``q``'s gradient and one row of the table's.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from rotmem.distributed.collectives import gather_from_ranks, into_shards
from rotmem.distributed.shards import EntityShard
from rotmem.ops import ce_tiles
from rotmem.ops.backend import backend_name

IGNORE_INDEX = -100


def _acc(q: torch.Tensor) -> torch.dtype:
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def shard_log_sum_exp(q: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """``logsumexp(q @ table^T, 1)``: ``[B]`` in float32 (float64 for float64), tile by tile."""
    rows, cols = ce_tiles.cross_entropy_blocks(q.shape[0], table.shape[0])
    no_target = torch.full((q.shape[0],), IGNORE_INDEX, dtype=torch.int64, device=q.device)
    name = backend_name(q.device, "cross_entropy_all")
    if name == "native":
        return torch.ops.rotmem.cross_entropy_all(q, table, no_target, "none", rows, cols)[1]
    if name == "triton":
        return torch.ops.rotmem_triton.cross_entropy_all(
            q.contiguous(), table.contiguous(), no_target, rows, cols
        )[1]
    return torch.logsumexp((q @ table.t()).to(_acc(q)), 1)


def shard_gradients(
    grad_rows: torch.Tensor,
    q: torch.Tensor,
    table: torch.Tensor,
    target: torch.Tensor,
    lse: torch.Tensor,
    need_q: bool,
    need_table: bool,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """``dL/dq``, ``dL/dtable`` for ``dL/dl_bk = g_b (exp(l_bk - lse_b) - [k == target_b])`` with
    ``target`` local rows of ``table``, ``lse`` the global log-sum-exp, ``grad_rows = g [B]``."""
    rows, cols = ce_tiles.cross_entropy_blocks(q.shape[0], table.shape[0])
    name = backend_name(q.device, "cross_entropy_all")
    if name == "native":
        dq, dt = torch.ops.rotmem.cross_entropy_all_backward(
            grad_rows, q, table, target, lse, "none", rows, cols, need_q, need_table
        )
    elif name == "triton":
        dq, dt = torch.ops.rotmem_triton.cross_entropy_all_backward(
            grad_rows.to(lse.dtype),
            q.contiguous(),
            table.contiguous(),
            target,
            lse,
            rows,
            cols,
            need_q,
            need_table,
        )
    else:
        probs = torch.exp((q @ table.t()).to(lse.dtype) - lse[:, None])
        probs[torch.arange(q.shape[0], device=q.device), target] -= 1
        probs = (probs * grad_rows[:, None].to(lse.dtype)).to(q.dtype)
        dq, dt = probs @ table, probs.t() @ q
    return (dq if need_q else None), (dt if need_table else None)


class _ShardedCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, table, target, shard: EntityShard, group) -> torch.Tensor:
        owned = shard.owns(target)
        local = shard.local(target)
        acc = _acc(q)
        lse = torch.logsumexp(gather_from_ranks(shard_log_sum_exp(q, table), group), 0)
        mine = (q.to(acc) * table[local].to(acc)).sum(-1)
        target_logit = torch.where(owned, mine, torch.zeros((), dtype=acc, device=q.device))
        dist.all_reduce(target_logit, group=group)
        ctx.save_for_backward(q, table, local, owned, lse)
        return lse - target_logit

    @staticmethod
    def backward(ctx, grad_rows: torch.Tensor):
        q, table, local, owned, lse = ctx.saved_tensors
        need_q, need_table = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        kernel_target = torch.where(owned, local, torch.zeros_like(local))
        dq, dt = shard_gradients(grad_rows.contiguous(), q, table, kernel_target, lse, need_q, need_table)
        elsewhere = torch.where(owned, torch.zeros_like(grad_rows), grad_rows).to(q.dtype)
        if dq is not None:
            dq = dq + elsewhere[:, None] * table[0]
        if dt is not None:
            dt[0] += elsewhere @ q
        return dq, dt, None, None, None


def sharded_cross_entropy(
    q: torch.Tensor,
    table: torch.Tensor,
    target: torch.Tensor,
    shard: EntityShard,
    reduction: str = "mean",
    group: dist.ProcessGroup | None = None,
) -> torch.Tensor:
    """1-vs-all cross-entropy of ``q [B, D]`` (the same on every rank) against the whole sharded table.

    ``table [shard.rows, D]``: this rank's rows; ``target [B]``: global entity ids (no ignored rows).
    Returns the same value on every rank: the mean (or sum, or per-query ``[B]``) loss. The queries'
    gradient is summed over ranks, so the replicated graph that made ``q`` sees the full gradient.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"unknown reduction {reduction!r}; expected 'mean', 'sum' or 'none'")
    if table.shape[0] != shard.rows:
        raise ValueError(f"table has {table.shape[0]} rows, shard {shard} holds {shard.rows}")
    rows = _ShardedCrossEntropy.apply(into_shards(q, group), table, target.long(), shard, group)
    if reduction == "none":
        return rows
    return rows.sum() if reduction == "sum" else rows.mean()
