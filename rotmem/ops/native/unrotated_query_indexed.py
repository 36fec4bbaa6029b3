"""``unrotated_query_indexed`` on the native kernels (``csrc/cpu/unrotated_query_indexed.cpp``,
``csrc/cuda/unrotated_query_indexed.cu``), with its fake and autograd formula: the kernels return
the entity rows' gradients ``[B, 2n]`` and the relation tables' (summed in float32, float64 for
float64 tables, and rounded once); the entity table's gradient is made from the rows by
``rotmem.ops.table_grad.table_gradient`` (sparse with ``sparse_grad``: no ``[N, 2n]`` tensor)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rotmem.ops.native._extension import LIB, acc_dtype, empty, masked, pairs, result_type
from rotmem.ops.table_grad import table_gradient


def unrotated_query_indexed(
    entity: torch.Tensor,
    w_table: torch.Tensor,
    w_hat_table: torch.Tensor | None,
    ent_idx: torch.Tensor,
    rel_idx: torch.Tensor,
    tau: torch.Tensor,
    alpha: torch.Tensor,
    log_s: torch.Tensor,
    log_base: torch.Tensor,
    tau0: float,
    sparse_grad: bool = False,
) -> torch.Tensor:
    """``rotmem.ops.reference.unrotated_query_indexed`` in one kernel (no ``[B, n]`` angle, cos or
    sin tensor); ids, ``tau`` and ``alpha`` broadcast against each other: ``[*shape, 2n]``."""
    n = pairs(entity, "entity")
    for name, table in (("w_table", w_table), ("w_hat_table", w_hat_table)):
        if table is not None and (table.dtype != entity.dtype or table.shape[-1] != 2 * n):
            raise ValueError(
                f"{name} {tuple(table.shape)} {table.dtype} does not match entity [N, {2 * n}] {entity.dtype}"
            )
    shape = torch.broadcast_shapes(ent_idx.shape, rel_idx.shape, tau.shape, alpha.shape)
    q = torch.ops.rotmem.unrotated_query_indexed(
        entity,
        w_table,
        w_hat_table,
        ent_idx.long().expand(shape).reshape(-1),
        rel_idx.long().expand(shape).reshape(-1),
        tau.expand(shape).reshape(-1),
        alpha.expand(shape).reshape(-1),
        log_s.reshape(()),
        log_base.reshape(()),
        float(tau0),
        sparse_grad,
    ).view(*shape, 2 * n)
    dtype = result_type([entity, tau, alpha, log_s, log_base])
    return q if dtype == q.dtype else q.to(dtype)


def register() -> dict[str, Callable]:
    """Register the autograd formulas; return the fake implementations by op name (the package
    registers those: torch wants them registered from the module ``csrc/rotmem.cpp`` names)."""

    def fake_unrotated_query_indexed(
        entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0, sparse_grad
    ):
        return entity.new_empty(ent_idx.shape[0], entity.shape[1])

    def fake_unrotated_query_indexed_backward(
        grad, entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0
    ):
        grad_w_hat = empty(entity) if w_hat_table is None else torch.empty_like(w_hat_table)
        return (
            entity.new_empty(ent_idx.shape[0], entity.shape[1], dtype=acc_dtype(entity)),
            torch.empty_like(w_table),
            grad_w_hat,
            torch.empty_like(tau),
            torch.empty_like(alpha),
            torch.empty_like(log_s),
            torch.empty_like(log_base),
        )

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:-2])
        ctx.tau0, ctx.sparse_grad = inputs[-2:]

    def backward(ctx, grad):
        entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base = ctx.saved_tensors
        g = torch.ops.rotmem.unrotated_query_indexed_backward(
            grad, entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, ctx.tau0
        )
        grad_entity = (
            table_gradient(g[0], ent_idx, entity, ctx.sparse_grad) if ctx.needs_input_grad[0] else None
        )
        grad_w_hat = None if w_hat_table is None else g[2]
        return masked(ctx, grad_entity, g[1], grad_w_hat, None, None, g[3], g[4], g[5], g[6], None, None)

    torch.library.register_autograd(LIB + "unrotated_query_indexed", backward, setup_context=setup)

    return {
        "unrotated_query_indexed": fake_unrotated_query_indexed,
        "unrotated_query_indexed_backward": fake_unrotated_query_indexed_backward,
    }
