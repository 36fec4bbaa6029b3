"""1-vs-all cross-entropy with a sparse, non-negative bias on some logits, on the fused kernels.

The logits are ``l = q @ entity^T`` plus ``b_p >= 0`` at a few ``(row, col)`` pairs (a model's
history term). Its partition function is the unbiased one plus an extra mass per row:
``Z'_r = Σ_j e^{l_rj} + C_r`` with ``C_r = Σ_{p in row r} e^{l_p} (e^{b_p} − 1) >= 0``. So the fused
cross-entropy (which never holds ``[B, N]``) computes it unchanged on widened inputs: ``q`` gets one
more coordinate holding ``log C_r`` and the table one more row that reads it (``[0 … 0, 1]``), every
entity reading 0 there. Its gradients are exact: autograd carries them through ``C_r`` into the pair
logits and biases, and through the fused op into ``q`` and the table. The widening is padded to a
multiple of 16 coordinates (an odd width slows the matrix products by a third on the CPU) and
costs one copy of the table per call.

A bias of exactly 0 adds nothing, and gets no gradient (its true gradient is its softmax
probability): give positive biases where their gradients matter, as ``FactHistory`` does.
"""

from __future__ import annotations

import torch

from rotmem import ops
from rotmem.host_syncs import cpu_only
from rotmem.ops.id_checks import check_ids
from rotmem.ops.table_grad import gather_rows, is_traced

PAD = 16
NO_MASS = -1e4  # log C_r of a row with no biased pair: e^-1e4 is 0, and 0 * -1e4 is not NaN


def cross_entropy_all_biased(
    q: torch.Tensor,
    entity: torch.Tensor,
    target: torch.Tensor,
    rows: torch.Tensor,
    cols: torch.Tensor,
    bias: torch.Tensor,
    reduction: str = "mean",
    sparse_grad: bool = False,
) -> torch.Tensor:
    """Cross-entropy of ``q [B, D]`` against ``entity [N, D]`` with ``bias [P] >= 0`` added to the
    logits at ``(rows [P], cols [P])`` (distinct pairs), ``target [B]`` (module docstring).
    ``reduction``: ``"mean"`` or ``"sum"``. ``sparse_grad``: the pairs' entity rows give the table
    a sparse gradient (``rotmem.ops.table_grad``), for a loss whose CE gives it a dense one."""
    # the widened table has one more row: without this, target == N would read it
    check_ids("cross_entropy_all_biased", "target", target, entity.shape[0], ignore=-100)
    check_ids("cross_entropy_all_biased", "rows", rows, q.shape[0], "q")
    check_ids("cross_entropy_all_biased", "cols", cols, entity.shape[0])
    if reduction not in ("mean", "sum"):
        raise ValueError(f"unknown reduction {reduction!r}; expected 'mean' or 'sum'")
    if bias.numel() and not is_traced(bias) and bias.device.type == "cpu":
        with cpu_only():  # on a GPU the check would wait for it: its biases come from a softplus
            if bool((bias < 0).any()):
                raise ValueError("cross_entropy_all_biased takes non-negative biases only")
    # Fixed-size tensor ops only below, so that a step on a GPU never waits for it: a zero bias
    # (no mass; log(expm1(0)) is -inf, module docstring) is masked to -inf, not filtered out.
    batch, width = q.shape
    acc = torch.promote_types(q.dtype, torch.float32)
    used = bias > 0
    safe_bias = torch.where(used, bias.to(acc), torch.ones_like(bias, dtype=acc))
    pair_logits = (q.index_select(0, rows) * gather_rows(entity, cols, sparse_grad)).sum(1)
    term = torch.where(used, pair_logits.to(acc) + torch.log(torch.expm1(safe_bias)), float("-inf"))
    peak = torch.full((batch,), float("-inf"), dtype=acc, device=q.device)
    peak = peak.scatter_reduce(0, rows, term.detach(), "amax")
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    mass = torch.zeros(batch, dtype=acc, device=q.device).index_add(0, rows, torch.exp(term - peak[rows]))
    log_mass = torch.where(mass > 0, torch.log(mass.clamp(min=1e-38)) + peak, torch.full_like(mass, NO_MASS))
    pad = PAD - width % PAD
    wide_q = torch.cat([q, log_mass.to(q.dtype).unsqueeze(1), q.new_zeros(batch, pad - 1)], 1)
    extra = entity.new_zeros(1, width + pad)
    extra[0, width] = 1
    wide_entity = torch.cat([torch.cat([entity, entity.new_zeros(entity.shape[0], pad)], 1), extra])
    loss = ops.cross_entropy_all(wide_q, wide_entity, target, reduction="sum")
    # minus the target's own bias, where it has one
    on_target = cols == target[rows]
    loss = loss - torch.where(on_target, bias.to(loss.dtype), 0.0).sum()
    return loss / batch if reduction == "mean" else loss
