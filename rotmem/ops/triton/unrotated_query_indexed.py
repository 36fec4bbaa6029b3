"""``unrotated_query_indexed``: from ids to the unrotated query ``q [B, 2n]`` in one kernel (Triton).

The kernel gathers ``e = E[ent_idx]``, ``w = W[rel_idx]``, ``w_hat = Ŵ[rel_idx]`` and builds
``theta_j = speed_b * base^(-j/n)`` in registers: no gathered rows and no ``[B, n]`` angle, cos or
sin tensor ever reach memory. ``speed_b = alpha_b * s * (tau_b - tau0)`` is a ``[B]`` vector
computed by the same torch expression as the reference (so it rounds identically); its gradient
flows to ``alpha``, ``tau`` and ``log_s`` through autograd.

Backward: one kernel recomputes the angles and rows, writes the entity rows' gradients
``[B, 2n]`` (``rotmem.ops.table_grad`` makes the table's gradient from them: sparse with
``sparse_grad``, no ``[N, 2n]`` tensor), scatters the relation rows' gradients into the
``[R, 2n]`` tables with atomic adds (float32 accumulators for 16-bit tables; the order of the
adds, hence the last bits, may vary between GPU runs), and writes per-row partial sums for
``dL/dspeed`` and ``dL/dlog_base`` that a small reduction finishes.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rotmem.ops.reference import LOG_BASE_MIN, LOG_S_MIN
from rotmem.ops.triton._common import (
    check_float,
    check_index,
    check_same_device,
    is_fp64,
    kernel_op,
    launch,
    pow2,
    promoted,
    sincos,
    upcast,
)
from rotmem.ops.triton._pairs import load_pairs, query_pairs, query_pairs_backward, store_pairs


@triton.jit
def _scatter_add(P, idx, cols, n, re, im, mask):
    p = P + idx[:, None] * (2 * n) + cols[None, :]
    tl.atomic_add(p, re, mask=mask, sem="relaxed")
    tl.atomic_add(p + n, im, mask=mask, sem="relaxed")


@triton.jit
def _angles(SPEED, LOG_BASE, rows, cols, n, row_mask, FP64: tl.constexpr):
    """``(theta [BLOCK_B, BLOCK_N], omega [BLOCK_N], j [BLOCK_N])`` in the reference's op order."""
    speed = upcast(tl.load(SPEED + rows, mask=row_mask, other=0.0), FP64)
    log_base = upcast(tl.load(LOG_BASE), FP64)
    j = upcast(cols, FP64)
    omega = tl.exp(-log_base * j / n)
    return speed[:, None] * omega[None, :], omega, j


@triton.jit
def _query_indexed_forward_kernel(
    E, W, WH, EI, RI, SPEED, LOG_BASE, Q, B, n, stride_e, stride_w, stride_wh,
    BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, HAS_WH: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    rows = (tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < B
    mask = row_mask[:, None] & (cols < n)[None, :]
    e = tl.load(EI + rows, mask=row_mask, other=0).to(tl.int64)
    r = tl.load(RI + rows, mask=row_mask, other=0).to(tl.int64)
    hr, hi = load_pairs(E, e, cols, stride_e, n, mask, FP64)
    rr, ri = load_pairs(W, r, cols, stride_w, n, mask, FP64)
    if HAS_WH:
        whr, whi = load_pairs(WH, r, cols, stride_wh, n, mask, FP64)
        rr = rr * whr
        ri = ri * whi
    theta, _, _ = _angles(SPEED, LOG_BASE, rows, cols, n, row_mask, FP64)
    s, c = sincos(theta)
    qr, qi = query_pairs(hr, hi, rr, ri, s, c)
    store_pairs(Q, rows, cols, 2 * n, n, qr, qi, mask)


@triton.jit
def _query_indexed_backward_kernel(
    G, E, W, WH, EI, RI, SPEED, LOG_BASE, GE, GW, GWH, PART_SPEED, PART_BASE,
    B, n, stride_g, stride_e, stride_w, stride_wh,
    BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, HAS_WH: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    pid_n = tl.program_id(1)
    rows = (tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_mask = rows < B
    mask = row_mask[:, None] & (cols < n)[None, :]
    e = tl.load(EI + rows, mask=row_mask, other=0).to(tl.int64)
    r = tl.load(RI + rows, mask=row_mask, other=0).to(tl.int64)
    gr, gi = load_pairs(G, rows, cols, stride_g, n, mask, FP64)
    hr, hi = load_pairs(E, e, cols, stride_e, n, mask, FP64)
    wr, wi = load_pairs(W, r, cols, stride_w, n, mask, FP64)
    rr = wr
    ri = wi
    if HAS_WH:
        whr, whi = load_pairs(WH, r, cols, stride_wh, n, mask, FP64)
        rr = wr * whr
        ri = wi * whi
    theta, omega, j = _angles(SPEED, LOG_BASE, rows, cols, n, row_mask, FP64)
    s, c = sincos(theta)
    ghr, ghi, grr, gri, gtheta = query_pairs_backward(gr, gi, hr, hi, rr, ri, s, c)
    store_pairs(GE, rows, cols, 2 * n, n, ghr, ghi, mask)
    if HAS_WH:
        _scatter_add(GW, r, cols, n, grr * whr, gri * whi, mask)
        _scatter_add(GWH, r, cols, n, grr * wr, gri * wi, mask)
    else:
        _scatter_add(GW, r, cols, n, grr, gri, mask)
    # theta = speed * omega_j, omega_j = exp(-log_base * j / n):
    # dL/dspeed = sum_j g_theta * omega_j, dL/dlog_base = -speed / n * sum_j g_theta * omega_j * j.
    gtheta = tl.where(mask, gtheta, 0.0)
    part = PART_SPEED + pid_n * B + rows
    tl.store(part, tl.sum(gtheta * omega[None, :], axis=1), mask=row_mask)
    tl.store(PART_BASE + pid_n * B + rows, tl.sum(gtheta * (omega * j)[None, :], axis=1), mask=row_mask)


def _blocks(rows: int, n: int, budget: int) -> tuple[int, int, tuple[int, int]]:
    block_n = pow2(n, high=128)
    block_b = pow2(rows, high=max(1, budget // block_n))
    return block_b, block_n, (triton.cdiv(rows, block_b), triton.cdiv(n, block_n))


@kernel_op("rotmem_triton::unrotated_query_indexed")
def _query_indexed(
    entity: torch.Tensor,
    w_table: torch.Tensor,
    w_hat_table: torch.Tensor | None,
    ent_idx: torch.Tensor,
    rel_idx: torch.Tensor,
    speed: torch.Tensor,
    log_base: torch.Tensor,
    out_dtype: torch.dtype,
    sparse_grad: bool,
) -> torch.Tensor:
    """``q [B, 2n]`` from tables (unit last stride), ids ``[B]``, ``speed [B]`` (rad/day * days)
    and the clamped scalar ``log_base``; ``sparse_grad`` is for the backward."""
    rows, n = ent_idx.shape[0], entity.shape[1] // 2
    q = torch.empty((rows, 2 * n), dtype=out_dtype, device=entity.device)
    if rows and n:
        block_b, block_n, grid = _blocks(rows, n, 2048)
        wh = w_table if w_hat_table is None else w_hat_table
        launch(
            _query_indexed_forward_kernel, grid, entity, w_table, wh, ent_idx, rel_idx, speed, log_base, q,
            rows, n, entity.stride(0), w_table.stride(0), wh.stride(0),
            BLOCK_B=block_b, BLOCK_N=block_n, HAS_WH=w_hat_table is not None,
            FP64=is_fp64(entity, w_table, w_hat_table, speed),
        )  # fmt: skip
    return q


@kernel_op("rotmem_triton::unrotated_query_indexed_backward")
def _query_indexed_backward(
    grad: torch.Tensor,
    entity: torch.Tensor,
    w_table: torch.Tensor,
    w_hat_table: torch.Tensor | None,
    ent_idx: torch.Tensor,
    rel_idx: torch.Tensor,
    speed: torch.Tensor,
    log_base: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(d entity rows [B, 2n] (float32 or float64), d w_table, d w_hat_table (empty for
    DistMult), d speed [B], d log_base)``."""
    grad = grad.contiguous()
    rows, n = ent_idx.shape[0], entity.shape[1] // 2
    fp64 = is_fp64(grad, entity, w_table, w_hat_table, speed)
    acc = torch.float64 if fp64 else torch.float32
    device = entity.device
    grad_e = torch.empty((rows, 2 * n), dtype=acc, device=device)  # every element is written
    grad_w = torch.zeros(w_table.shape, dtype=acc, device=device)
    grad_wh = torch.zeros(w_table.shape if w_hat_table is not None else (0,), dtype=acc, device=device)
    block_b, block_n, grid = _blocks(rows, n, 1024)
    # the partial sums feed scalar gradients summed over B * n terms with cancellations: float64
    part_speed = torch.zeros((grid[1], rows), dtype=torch.float64, device=device)
    part_base = torch.zeros((grid[1], rows), dtype=torch.float64, device=device)
    if rows and n:
        wh = w_table if w_hat_table is None else w_hat_table
        launch(
            _query_indexed_backward_kernel, grid, grad, entity, w_table, wh, ent_idx, rel_idx, speed,
            log_base, grad_e, grad_w, grad_w if w_hat_table is None else grad_wh, part_speed, part_base,
            rows, n, grad.stride(0), entity.stride(0), w_table.stride(0), wh.stride(0),
            BLOCK_B=block_b, BLOCK_N=block_n, HAS_WH=w_hat_table is not None, FP64=fp64,
        )  # fmt: skip
    grad_speed = part_speed.sum(0)
    grad_log_base = -(speed.double() * part_base.sum(0)).sum() / max(n, 1)
    return (
        grad_e,
        grad_w.to(w_table.dtype),
        grad_wh.to(w_table.dtype if w_hat_table is None else w_hat_table.dtype),
        grad_speed.to(speed.dtype),
        grad_log_base.to(log_base.dtype),
    )


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
    """Gather rows, compute angles and build the unrotated query: ``[B, 2n]``.

    ``entity [N, 2n]``, ``w_table``/``w_hat_table [R, 2n]`` (``None`` for DistMult),
    ``ent_idx``/``rel_idx [B]`` int64, ``tau [B]`` days, ``alpha [B]`` speeds of the batch's
    relations, ``log_s``/``log_base`` scalars, ``tau0`` the reference day.
    Differentiable in the tables, ``tau``, ``alpha``, ``log_s`` and ``log_base``; with
    ``sparse_grad`` the entity table's gradient is sparse (``rotmem.ops.table_grad``).
    """
    tables = {"entity": entity, "w_table": w_table, "w_hat_table": w_hat_table}
    for name, t in tables.items():
        if t is not None:
            check_float(name, t)
            if t.dim() != 2 or t.shape[1] != entity.shape[1] or t.shape[1] % 2:
                raise ValueError(
                    f"{name} must be [rows, 2n] like entity {tuple(entity.shape)}, got {tuple(t.shape)}"
                )
    if w_hat_table is not None and w_hat_table.shape != w_table.shape:
        raise ValueError(f"w_hat_table {tuple(w_hat_table.shape)} must match w_table {tuple(w_table.shape)}")
    check_same_device(**tables, ent_idx=ent_idx, rel_idx=rel_idx, tau=tau, alpha=alpha)
    check_index("unrotated_query_indexed", "ent_idx", ent_idx, entity.shape[0], "the entity table")
    check_index("unrotated_query_indexed", "rel_idx", rel_idx, w_table.shape[0], "the relation table")
    rows = ent_idx.shape[0]
    for name, t in {"rel_idx": rel_idx, "tau": tau, "alpha": alpha}.items():
        if t.shape != (rows,):
            raise ValueError(f"{name} must have shape ({rows},) like ent_idx, got {tuple(t.shape)}")
    angle_dtype = promoted(alpha, tau, log_s, log_base)
    out_dtype = promoted(entity, w_table, w_hat_table, angle_dtype)
    # Angles in at least float32 whatever the tables' precision: 16-bit days or speeds would
    # put the rotation off by whole radians.
    work = torch.promote_types(angle_dtype, torch.float32)
    speed = alpha.to(work) * torch.exp(log_s.to(work).clamp(min=LOG_S_MIN)) * (tau.to(work) - tau0)
    log_base = log_base.to(work).clamp(min=LOG_BASE_MIN)

    def rows_unit(t: torch.Tensor | None) -> torch.Tensor | None:
        return t if t is None or t.stride(-1) == 1 else t.contiguous()

    return _query_indexed(
        rows_unit(entity), rows_unit(w_table), rows_unit(w_hat_table), ent_idx.contiguous(),
        rel_idx.contiguous(), speed.contiguous(), log_base, out_dtype, sparse_grad,
    )  # fmt: skip
