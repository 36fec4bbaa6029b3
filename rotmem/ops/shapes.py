"""The shape functions (fake implementations) of the fused backends' operators, one per operator.

``rotmem.ops.registry`` names each one in its op's entry, and registers it for the operator of that
name in every backend: ``torch.ops.rotmem.<name>`` (native, schemas in ``csrc/rotmem.cpp``) and
``torch.ops.rotmem_triton.<name>`` (Triton). A shape function takes the operator's arguments by
name, the ones it reads only; where the two backends' schemas differ it reads an argument only one
of them has through a keyword with a default (the Triton ``cross_entropy_all`` has no
``reduction``: it returns per-row losses; its ``unrotated_query_indexed`` takes ``speed`` and
``out_dtype`` where the native one takes ``tau``, ``alpha`` and ``log_s``). The outputs are new,
dense tensors, as the kernels write them; ``opcheck`` in ``tests/ops`` compares them with the
kernels' outputs on every backend.
"""

from __future__ import annotations

import torch


def acc(*tensors: torch.Tensor | None) -> torch.dtype:
    """The kernels' accumulation dtype: float64 when an input is float64, else float32."""
    fp64 = any(t is not None and t.dtype == torch.float64 for t in tensors)
    return torch.float64 if fp64 else torch.float32


def _like_or_empty(t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """The gradient of an optional input: ``t``'s shape, or empty (``like``'s dtype) when absent."""
    return like.new_empty(0) if t is None else torch.empty_like(t)


def _if(need: bool, t: torch.Tensor) -> torch.Tensor:
    """A gradient output that is empty when not asked for."""
    return torch.empty_like(t) if need else t.new_empty(0)


def rotate(x, theta):
    return torch.empty_like(x, dtype=torch.promote_types(x.dtype, theta.dtype))


def rotate_backward(x, theta):
    return torch.empty_like(x), torch.empty_like(theta)


def unrotated_query(h, w, w_hat, theta):
    dtype = torch.promote_types(torch.promote_types(h.dtype, w.dtype), theta.dtype)
    return torch.empty_like(h, dtype=dtype if w_hat is None else torch.promote_types(dtype, w_hat.dtype))


def unrotated_query_backward(h, w, w_hat, theta):
    return torch.empty_like(h), torch.empty_like(w), _like_or_empty(w_hat, w), torch.empty_like(theta)


def unrotated_query_indexed(entity, ent_idx, out_dtype=None):
    return entity.new_empty(ent_idx.shape[0], entity.shape[1], dtype=out_dtype or entity.dtype)


def unrotated_query_indexed_backward(
    grad, entity, w_table, w_hat_table, ent_idx, tau=None, alpha=None, log_s=None, speed=None, log_base=None
):
    """The entity rows' gradients ``[B, 2n]`` (accumulation dtype), then one gradient per table and
    per tensor of the angles (native: ``tau, alpha, log_s, log_base``; Triton: ``speed, log_base``)."""
    dtype = acc(grad, entity, w_table, w_hat_table, speed)
    rows = entity.new_empty(ent_idx.shape[0], entity.shape[1], dtype=dtype)
    angles = tuple(torch.empty_like(t) for t in (tau, alpha, log_s, speed, log_base) if t is not None)
    return rows, torch.empty_like(w_table), _like_or_empty(w_hat_table, w_table), *angles


def cross_entropy_all(q, entity, reduction="none"):
    """``(loss, lse)``: per-row losses ``[B]`` (a scalar when reduced), log-sum-exps ``[B]``."""
    dtype = acc(q, entity)
    loss = q.new_empty(q.shape[0], dtype=dtype) if reduction == "none" else q.new_empty((), dtype=dtype)
    return loss, q.new_empty(q.shape[0], dtype=dtype)


def cross_entropy_all_backward(q, entity, need_q, need_entity):
    return _if(need_q, q), _if(need_entity, entity)


def cross_entropy_all_train(q, entity, need_q, need_entity):
    return q.new_empty((), dtype=acc(q, entity)), _if(need_q, q), _if(need_entity, entity)


def filtered_rank_counts(q, filter_ptr):
    shape = (filter_ptr.shape[0], q.shape[0])
    return q.new_empty(shape, dtype=torch.int64), q.new_empty(shape, dtype=torch.int64)


def target_scores(q):
    return q.new_empty(q.shape[0], dtype=acc(q))


def n3(x):
    return x.new_empty((), dtype=acc(x))


def n3_backward(x):
    return torch.empty_like(x)
