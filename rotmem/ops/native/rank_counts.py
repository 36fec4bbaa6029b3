"""``filtered_rank_counts`` and ``target_scores`` on the native kernels (``csrc/rank_counts_driver.h``,
per-device count kernels in ``csrc/{cpu,cuda}/rank_counts.*``); their fakes are
``rotmem.ops.registry``'s (no gradient).
Tiles as the fused cross-entropy's (``rotmem.ops.ce_tiles``): never the ``[B, N]`` scores."""

from __future__ import annotations

import torch

from rotmem.ops import ce_tiles
from rotmem.ops.id_checks import check_ids
from rotmem.ops.rank_csr import check_filter_csr, in_target_order


def filtered_rank_counts(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    filter_ptr: torch.Tensor,
    filter_idx: torch.Tensor,
    target_score: torch.Tensor | None = None,
    entity_offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``rotmem.ops.reference.filtered_rank_counts``, tile by tile."""
    check_filter_csr(filter_ptr, filter_idx, q.shape[0])
    block_rows, block_cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])
    return filtered_rank_counts_tiled(
        q, entity, target, filter_ptr, filter_idx, target_score, entity_offset, block_rows, block_cols
    )


def filtered_rank_counts_tiled(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    filter_ptr: torch.Tensor,
    filter_idx: torch.Tensor,
    target_score: torch.Tensor | None,
    entity_offset: int,
    block_rows: int,
    block_cols: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``filtered_rank_counts`` with explicit tiles of ``block_rows x block_cols`` scores."""

    def count(q, target, filter_ptr, filter_idx):
        return torch.ops.rotmem.filtered_rank_counts(
            q, entity, target, target_score, filter_ptr, filter_idx, entity_offset, block_rows, block_cols
        )

    # here, before in_target_order reorders the targets: the kernel would name a position of that order
    if target_score is None:
        check_ids("filtered_rank_counts", "target", target, entity.shape[0], offset=entity_offset)
    if target_score is None and block_cols < entity.shape[0]:
        return in_target_order(count, q, target.long(), filter_ptr, filter_idx)
    return count(q, target.long(), filter_ptr, filter_idx)


def target_scores(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, entity_offset: int = 0
) -> torch.Tensor:
    """``rotmem.ops.reference.target_scores``, read from the tiles ``filtered_rank_counts`` counts."""
    block_rows, block_cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])
    return torch.ops.rotmem.target_scores(q, entity, target.long(), entity_offset, block_rows, block_cols)
