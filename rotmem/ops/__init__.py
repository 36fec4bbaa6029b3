"""RoMem ops, dispatched to a backend by device (see ``rotmem.ops.backend``).

The math of every op is ``rotmem.ops.reference``; all backends agree with it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from rotmem.ops import reference
from rotmem.ops.backend import backend_module, backend_name


def rotate(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Rotate complex pairs of ``x [..., 2n]`` (split halves) by ``theta [..., n]`` radians."""
    return backend_module(x.device, "rotate").rotate(x, theta)


def unrotated_query(
    h: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor | None, theta: torch.Tensor
) -> torch.Tensor:
    """``Rot(Rot(h, theta) * w * w_hat, -theta)``: ``[B, 2n]``; ``w_hat=None`` for DistMult."""
    return backend_module(h.device, "unrotated_query").unrotated_query(h, w, w_hat, theta)


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
    """Gather rows by index, compute angles from ``tau`` (days) and build the query ``[B, 2n]``.

    ``sparse_grad``: the entity table's gradient is sparse, for a loss that also gives the table a
    dense gradient (see ``rotmem.ops.table_grad``).
    """
    return backend_module(entity.device, "unrotated_query_indexed").unrotated_query_indexed(
        entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0, sparse_grad
    )


def autocast_inputs(q: torch.Tensor, entity: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Under ``torch.autocast`` (Lightning's ``precision="bf16-mixed"``), float32 ``q`` and
    ``entity`` in the autocast dtype, as autocast casts a matrix product's inputs: the products of
    the ops below then run in bfloat16 on every backend, while the float32 weights (the master copy)
    get float32 gradients through the cast. Unchanged outside autocast."""
    device = q.device.type
    if not torch.is_autocast_enabled(device):
        return q, entity
    dtype = torch.get_autocast_dtype(device)
    return tuple(t.to(dtype) if t.dtype == torch.float32 else t for t in (q, entity))


def score_all(q: torch.Tensor, entity: torch.Tensor) -> torch.Tensor:
    """Scores of ``q [B, 2n]`` against every row of ``entity [N, 2n]``: ``[B, N]``."""
    q, entity = autocast_inputs(q, entity)
    return backend_module(q.device, "score_all").score_all(q, entity)


def cross_entropy_all(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    """1-vs-all cross-entropy over all entities (fused backends never hold ``[B, N]``); its products
    in the autocast dtype under ``torch.autocast`` (``autocast_inputs``)."""
    q, entity = autocast_inputs(q, entity)
    return backend_module(q.device, "cross_entropy_all").cross_entropy_all(
        q, entity, target, reduction=reduction
    )


def filtered_rank_counts(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    filter_ptr: torch.Tensor,
    filter_idx: torch.Tensor,
    target_score: torch.Tensor | None = None,
    entity_offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query and CSR filter, candidates scoring above / equal to the target: ``(higher, ties)``
    int64 ``[F, B]`` (see ``reference.filtered_rank_counts``; fused backends never hold ``[B, N]``)."""
    return backend_module(q.device, "filtered_rank_counts").filtered_rank_counts(
        q, entity, target, filter_ptr, filter_idx, target_score, entity_offset
    )


def target_scores(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, entity_offset: int = 0
) -> torch.Tensor:
    """Each target's score ``[B]`` as ``filtered_rank_counts`` reads it, 0 for targets outside this
    shard ``entity`` (global ids ``entity_offset ..``): summed over shards, every target's score."""
    return backend_module(q.device, "target_scores").target_scores(q, entity, target, entity_offset)


def n3(tensors: Sequence[torch.Tensor], kind: str = "l4") -> torch.Tensor:
    """The N3 (``"modulus3"``) or L4 (``"l4"``) regulariser summed over ``tensors``."""
    return backend_module(tensors[0].device, "n3").n3(tensors, kind=kind)


__all__ = [
    "backend_name",
    "cross_entropy_all",
    "filtered_rank_counts",
    "n3",
    "reference",
    "rotate",
    "score_all",
    "target_scores",
    "unrotated_query",
    "unrotated_query_indexed",
]
