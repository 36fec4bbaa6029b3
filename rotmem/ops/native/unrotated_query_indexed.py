"""``unrotated_query_indexed`` on the native kernels (``csrc/cpu/unrotated_query_indexed.cpp``,
``csrc/cuda/unrotated_query_indexed.cu``); its fake and gradient are ``rotmem.ops.registry``'s:
the kernels return the entity rows' gradients ``[B, 2n]`` and the relation tables' (summed in
float32, float64 for float64 tables, and rounded once); the entity table's gradient is made from the
rows by ``rotmem.ops.table_grad.table_gradient`` (sparse with ``sparse_grad``: no ``[N, 2n]``
tensor)."""

from __future__ import annotations

import torch

from rotmem.ops.native._extension import pairs, result_type


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
