"""``filtered_rank_counts``: per query, candidates scoring above / equal to the target, never holding
``[B, N]`` (Triton).

The native driver's loop (``csrc/rank_counts_driver.h``): a tile of scores ``q[rows] @ entity[cols]^T``
comes from one dense product (cuBLAS), the target's score is picked out of the tile that holds it,
and ``_count_kernel`` (one program per tile row) counts the row's scores above and equal to it, then
takes off the target's own column and the row's filtered ids that fall in the tile. When a row block
needs several entity chunks, its targets' scores come from a first sweep over the chunks that hold
them (the queries are sorted by target, so those are few), the counts from a second.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rotmem.ops import ce_tiles
from rotmem.ops.id_checks import check_ids
from rotmem.ops.rank_csr import check_filter_csr, in_target_order
from rotmem.ops.triton._common import check_float, check_same_device, is_fp64, kernel_op, launch, pow2, upcast


@triton.jit
def _count_kernel(
    TILE, SCORE, TARGET, FILTER_PTR, FILTER_IDX, HIGHER, TIES, BAD, r0, c0, batch, stride,
    COLS: tl.constexpr, BLOCK: tl.constexpr, FILTERS: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    """Tile row ``i`` (entities ``[c0, c0 + COLS)``) adds its counts to batch row ``r0 + i``."""
    i = tl.program_id(0).to(tl.int64)
    row = r0 + i
    ROW = TILE + i * COLS
    s = tl.load(SCORE + row)
    higher = tl.zeros([], dtype=tl.int64)
    ties = tl.zeros([], dtype=tl.int64)
    bad = tl.zeros([], dtype=tl.int64)
    for start in range(0, COLS, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < COLS
        z = upcast(tl.load(ROW + cols, mask=mask, other=0.0), FP64)
        higher += tl.sum((mask & (z > s)).to(tl.int64), axis=0)
        ties += tl.sum((mask & (z == s)).to(tl.int64), axis=0)
        bad += tl.sum((mask & ~(z - z == 0)).to(tl.int64), axis=0)  # NaN or infinite
    t = tl.load(TARGET + row) - c0
    has_target = (t >= 0) & (t < COLS)  # the target is never a candidate
    # (each loop has its own names: a compiled loop cannot turn a scalar variable into a block)
    z_target = upcast(tl.load(ROW + t, mask=has_target, other=0.0), FP64)
    higher -= (has_target & (z_target > s)).to(tl.int64)
    ties -= (has_target & (z_target == s)).to(tl.int64)
    for f in tl.static_range(FILTERS):
        end = tl.load(FILTER_PTR + f * stride + row + 1)
        drop_h = tl.zeros([], dtype=tl.int64)
        drop_e = tl.zeros([], dtype=tl.int64)
        for j in range(tl.load(FILTER_PTR + f * stride + row), end, BLOCK):
            at = j + tl.arange(0, BLOCK)
            k = tl.load(FILTER_IDX + at, mask=at < end, other=-1) - c0
            inside = (at < end) & (k >= 0) & (k < COLS) & (k != t)
            z_filtered = upcast(tl.load(ROW + k, mask=inside, other=0.0), FP64)
            drop_h += tl.sum((inside & (z_filtered > s)).to(tl.int64), axis=0)
            drop_e += tl.sum((inside & (z_filtered == s)).to(tl.int64), axis=0)
        out = f * batch + row
        tl.store(HIGHER + out, tl.load(HIGHER + out) + higher - drop_h)
        tl.store(TIES + out, tl.load(TIES + out) + ties - drop_e)
    tl.store(BAD + row, tl.full([], 1, tl.int8), mask=(bad > 0) | ~(s - s == 0))


def _pick_target(tile: torch.Tensor, r0: int, c0: int, target: torch.Tensor, score: torch.Tensor) -> None:
    """``score[r0 + i] <- tile[i, target[r0 + i] - c0]`` for the rows whose target is in the tile."""
    local = target[r0 : r0 + tile.shape[0]] - c0
    inside = (local >= 0) & (local < tile.shape[1])
    picked = tile.gather(1, local.clamp(0, tile.shape[1] - 1).unsqueeze(1)).squeeze(1).to(score.dtype)
    score[r0 : r0 + tile.shape[0]] = torch.where(inside, picked, score[r0 : r0 + tile.shape[0]])


@kernel_op("rotmem_triton::filtered_rank_counts")
def _rank_counts(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    target_score: torch.Tensor | None,
    filter_ptr: torch.Tensor,
    filter_idx: torch.Tensor,
    block_rows: int,
    block_cols: int,
    target_chunks: list[int],
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(higher, ties)`` int64 ``[F, B]`` with table-local ``target`` and ``filter_idx`` ids.

    ``target_chunks``: ``[first, last]`` entity chunk of each row block's targets, flattened, when the
    target scores are picked in a first sweep; empty when they are given or a tile holds every entity.
    """
    (batch, _), entities, filters = q.shape, entity.shape[0], filter_ptr.shape[0]
    fp64 = is_fp64(q, entity)
    acc = torch.float64 if fp64 else torch.float32
    higher = torch.zeros((filters, batch), dtype=torch.int64, device=q.device)
    ties = torch.zeros((filters, batch), dtype=torch.int64, device=q.device)
    bad = torch.zeros((batch,), dtype=torch.int8, device=q.device)
    if batch == 0 or entities == 0:
        return higher, ties
    picked = target_score is None
    score = torch.zeros((batch,), dtype=acc, device=q.device) if picked else target_score.to(acc).contiguous()
    whole_rows = block_cols >= entities
    for block, r0 in enumerate(range(0, batch, block_rows)):
        q_rows = q[r0 : r0 + block_rows]
        if target_chunks:  # first sweep: the chunks that hold this block's targets
            first, last = target_chunks[2 * block : 2 * block + 2]
            for c0 in range(first * block_cols, (last + 1) * block_cols, block_cols):
                _pick_target(q_rows @ entity[c0 : c0 + block_cols].t(), r0, c0, target, score)
        for c0 in range(0, entities, block_cols):
            tile = q_rows @ entity[c0 : c0 + block_cols].t()
            if picked and whole_rows:
                _pick_target(tile, r0, c0, target, score)
            launch(
                _count_kernel, (tile.shape[0],), tile, score, target, filter_ptr, filter_idx,
                higher, ties, bad, r0, c0, batch, batch + 1,
                COLS=tile.shape[1], BLOCK=pow2(tile.shape[1], low=16, high=2048), FILTERS=filters, FP64=fp64,
            )  # fmt: skip
    flagged = bad.bool().unsqueeze(0)
    return higher.masked_fill(flagged, -1), ties.masked_fill(flagged, -1)


def filtered_rank_counts(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    filter_ptr: torch.Tensor,
    filter_idx: torch.Tensor,
    target_score: torch.Tensor | None = None,
    entity_offset: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(higher, ties)`` int64 ``[F, B]``: ``rotmem.ops.reference.filtered_rank_counts``, tile by tile."""
    check_float("q", q)
    check_float("entity", entity)
    check_same_device(q=q, entity=entity, target=target, filter_ptr=filter_ptr, filter_idx=filter_idx)
    if q.dim() != 2 or entity.dim() != 2 or q.shape[1] != entity.shape[1] or q.dtype != entity.dtype:
        raise ValueError(
            f"q [B, D] and entity [N, D] must share D and dtype, got {q.dtype} {tuple(q.shape)} and "
            f"{entity.dtype} {tuple(entity.shape)}"
        )
    if target.shape != (q.shape[0],):
        raise ValueError(f"target must have shape ({q.shape[0]},) like q's rows, got {tuple(target.shape)}")
    if target_score is not None and target_score.shape != (q.shape[0],):
        raise ValueError(f"target_score must have shape ({q.shape[0]},), got {tuple(target_score.shape)}")
    check_filter_csr(filter_ptr, filter_idx, q.shape[0])
    if target_score is None:
        check_ids("filtered_rank_counts", "target", target, entity.shape[0], offset=entity_offset)
    local = target.long() - entity_offset
    rows, cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])
    q, entity = q.contiguous(), entity.contiguous()
    local_idx = (filter_idx - entity_offset).contiguous()

    def count(q, target, filter_ptr, filter_idx):
        chunks = []
        if target_score is None and cols < entity.shape[0]:  # the target chunks of each row block
            chunk = (target // cols).tolist()
            for r0 in range(0, len(chunk), rows):
                chunks += [min(chunk[r0 : r0 + rows]), max(chunk[r0 : r0 + rows])]
        return _rank_counts(
            q, entity, target, target_score, filter_ptr.contiguous(), filter_idx, rows, cols, chunks
        )

    if target_score is None and cols < entity.shape[0]:
        return in_target_order(count, q, local.contiguous(), filter_ptr, local_idx)
    return count(q, local.contiguous(), filter_ptr, local_idx)


def target_scores(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, entity_offset: int = 0
) -> torch.Tensor:
    """Each target's score ``[B]``, read from the tiles ``filtered_rank_counts`` counts (same row
    blocks and entity chunks); 0 for a target outside ``entity`` (global ids ``entity_offset ..``)."""
    check_same_device(q=q, entity=entity, target=target)
    rows, cols = ce_tiles.cross_entropy_blocks(q.shape[0], entity.shape[0])
    acc = torch.float64 if is_fp64(q, entity) else torch.float32
    score = torch.zeros((q.shape[0],), dtype=acc, device=q.device)
    local = target.long() - entity_offset
    inside = ((local >= 0) & (local < entity.shape[0])).tolist()
    chunk = (local // cols).tolist()
    for r0 in range(0, q.shape[0], rows):
        owned = [c for c, i in zip(chunk[r0 : r0 + rows], inside[r0 : r0 + rows], strict=True) if i]
        if owned:
            for c0 in range(min(owned) * cols, (max(owned) + 1) * cols, cols):
                _pick_target(q[r0 : r0 + rows] @ entity[c0 : c0 + cols].t(), r0, c0, local, score)
    return score
