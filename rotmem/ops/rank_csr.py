"""The CSR filters of ``filtered_rank_counts``: checks and row reordering, shared by every backend.

``F`` filters over ``B`` queries share one id array: row ``b`` of filter ``f`` is
``filter_idx[filter_ptr[f, b] : filter_ptr[f, b + 1]]``, global entity ids in strictly increasing
order (so no id is removed twice).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext

import torch

from rotmem.host_syncs import cpu_only
from rotmem.ops import id_checks


def check_filter_csr(filter_ptr: torch.Tensor, filter_idx: torch.Tensor, batch: int) -> None:
    """Raise a ValueError naming the problem unless ``(filter_ptr [F, B+1], filter_idx)`` is such a CSR.

    On a GPU it reads two booleans back, as ``rotmem.ops.id_checks`` does; with ``ROTMEM_CHECK_IDS=0``
    there, and under ``torch.compile``, it is a device-side assert instead (no wait for the device).
    """
    if filter_ptr.dim() != 2 or filter_ptr.shape[1] != batch + 1 or filter_ptr.dtype != torch.int64:
        raise ValueError(
            f"filter_ptr must be int64 [F, {batch + 1}] for {batch} queries, got "
            f"{filter_ptr.dtype} {tuple(filter_ptr.shape)}"
        )
    if filter_idx.dim() != 1 or filter_idx.dtype != torch.int64:
        raise ValueError(
            f"filter_idx must be a 1-D int64 tensor, got {filter_idx.dtype} {tuple(filter_idx.shape)}"
        )
    if filter_ptr.shape[0] == 0:
        raise ValueError("filter_ptr holds no filter (F = 0); pass one empty filter for unfiltered ranks")
    steps = filter_ptr[:, 1:] - filter_ptr[:, :-1]
    spans = filter_ptr[:, 0].ge(0) & filter_ptr[:, -1].le(filter_idx.numel()) & steps.ge(0).all(1)
    sorted_rows = _rows_increase(filter_ptr, filter_idx)
    if torch.compiler.is_compiling() or not id_checks.enabled(filter_ptr.device):
        torch._assert_async(spans.all() & sorted_rows, "filter_ptr/filter_idx is not a sorted CSR filter")
        return
    with cpu_only() if filter_ptr.device.type == "cpu" else nullcontext():  # a CPU readback waits for no GPU
        good_spans, good_rows = torch.stack([spans.all(), sorted_rows]).tolist()  # one readback
    if not good_spans:
        raise ValueError(
            f"filter_ptr rows must be non-decreasing offsets into filter_idx [{filter_idx.numel()}]"
        )
    if not good_rows:
        raise ValueError("each filter row's ids must be strictly increasing (sorted, no repeats)")


def _rows_increase(filter_ptr: torch.Tensor, filter_idx: torch.Tensor) -> torch.Tensor:
    """Whether every row's ids strictly increase: a 0-dim bool tensor."""
    nnz = filter_idx.numel()
    if nnz < 2:
        return torch.ones((), dtype=torch.bool, device=filter_idx.device)
    position = torch.arange(1, nnz, device=filter_idx.device)  # the second id of each adjacent pair
    increases = filter_idx[1:] > filter_idx[:-1]
    ok = torch.ones((), dtype=torch.bool, device=filter_idx.device)
    for ptr in filter_ptr.clamp(0, nnz):
        row_start = torch.zeros(nnz + 1, dtype=torch.bool, device=filter_idx.device)
        row_start[ptr] = True
        within = (position > ptr[0]) & (position < ptr[-1]) & ~row_start[1:nnz]
        ok = ok & (increases | ~within).all()
    return ok


def csr_from_rows(
    rows: list[list[list[int]]], device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(filter_ptr [F, B+1], filter_idx)`` from ``rows[f][b]``, the ids of filter ``f``'s row ``b``."""
    ptr, idx, offset = [], [], 0
    for filter_rows in rows:
        line = [offset]
        for ids in filter_rows:
            ids = sorted(set(ids))
            idx.extend(ids)
            offset += len(ids)
            line.append(offset)
        ptr.append(line)
    return (
        torch.tensor(ptr, dtype=torch.int64, device=device).reshape(len(rows), -1),
        torch.tensor(idx, dtype=torch.int64, device=device),
    )


def permute_rows(
    filter_ptr: torch.Tensor, filter_idx: torch.Tensor, order: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The CSR whose row ``i`` is row ``order[i]`` of ``(filter_ptr, filter_idx)``, every filter."""
    counts = (filter_ptr[:, 1:] - filter_ptr[:, :-1])[:, order]  # [F, B]
    starts = filter_ptr[:, :-1][:, order]
    flat_counts, flat_starts = counts.reshape(-1), starts.reshape(-1)
    total = int(flat_counts.sum())
    new_ptr = torch.zeros(counts.shape[0], counts.shape[1] + 1, dtype=torch.int64, device=counts.device)
    new_ptr[:, 1:] = torch.cumsum(flat_counts, 0).view_as(counts)
    new_ptr[1:, 0] = new_ptr[:-1, -1]
    row_base = torch.repeat_interleave(flat_starts, flat_counts, output_size=total)
    new_base = torch.repeat_interleave(new_ptr[:, :-1].reshape(-1), flat_counts, output_size=total)
    positions = row_base + torch.arange(total, device=counts.device) - new_base
    return new_ptr, filter_idx[positions]


def in_target_order(
    count: Callable[
        [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]
    ],
    q: torch.Tensor,
    target: torch.Tensor,
    filter_ptr: torch.Tensor,
    filter_idx: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``count(q, target, filter_ptr, filter_idx)`` run on the queries sorted by target, its ``[F, B]``
    outputs put back in the callers' order (a tiled kernel's row block then needs few entity chunks
    to find its targets' scores)."""
    order = torch.argsort(target)
    ptr, idx = permute_rows(filter_ptr, filter_idx, order)
    higher, ties = count(q[order], target[order], ptr, idx)
    back = torch.empty_like(order)
    back[order] = torch.arange(order.numel(), device=order.device)
    return higher[:, back], ties[:, back]
