"""``unrotated_query(h, w, w_hat, theta)``: ``Rot(Rot(h, theta) * w * w_hat, -theta)`` (Triton).

The dense form, for callers that already hold the rows and angles; training uses
``unrotated_query_indexed``, which gathers rows and builds angles inside the kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from rotmem.ops.triton._common import (
    cast_for,
    check_float,
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
from rotmem.ops.triton.rotate import rows_of


@triton.jit
def _query_forward_kernel(
    H, W, WH, T, Q, M, n, stride_h, stride_w, stride_wh, stride_t,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_WH: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < n)[None, :]
    hr, hi = load_pairs(H, rows, cols, stride_h, n, mask, FP64)
    rr, ri = load_pairs(W, rows, cols, stride_w, n, mask, FP64)
    if HAS_WH:
        whr, whi = load_pairs(WH, rows, cols, stride_wh, n, mask, FP64)
        rr = rr * whr
        ri = ri * whi
    theta = upcast(tl.load(T + rows[:, None] * stride_t + cols[None, :], mask=mask, other=0.0), FP64)
    s, c = sincos(theta)
    qr, qi = query_pairs(hr, hi, rr, ri, s, c)
    store_pairs(Q, rows, cols, 2 * n, n, qr, qi, mask)


@triton.jit
def _query_backward_kernel(
    G, H, W, WH, T, GH, GW, GWH, GT, M, n, stride_g, stride_h, stride_w, stride_wh, stride_t,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HAS_WH: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < n)[None, :]
    gr, gi = load_pairs(G, rows, cols, stride_g, n, mask, FP64)
    hr, hi = load_pairs(H, rows, cols, stride_h, n, mask, FP64)
    wr, wi = load_pairs(W, rows, cols, stride_w, n, mask, FP64)
    rr = wr
    ri = wi
    if HAS_WH:
        whr, whi = load_pairs(WH, rows, cols, stride_wh, n, mask, FP64)
        rr = wr * whr
        ri = wi * whi
    theta = upcast(tl.load(T + rows[:, None] * stride_t + cols[None, :], mask=mask, other=0.0), FP64)
    s, c = sincos(theta)
    ghr, ghi, grr, gri, gtheta = query_pairs_backward(gr, gi, hr, hi, rr, ri, s, c)
    store_pairs(GH, rows, cols, 2 * n, n, ghr, ghi, mask)
    if HAS_WH:
        store_pairs(GW, rows, cols, 2 * n, n, grr * whr, gri * whi, mask)
        store_pairs(GWH, rows, cols, 2 * n, n, grr * wr, gri * wi, mask)
    else:
        store_pairs(GW, rows, cols, 2 * n, n, grr, gri, mask)
    tl.store(GT + rows[:, None] * n + cols[None, :], cast_for(gtheta, GT), mask=mask)


def _blocks(rows: int, n: int, budget: int) -> tuple[int, int, tuple[int, int]]:
    block_n = pow2(n, high=128)
    block_m = pow2(rows, high=max(1, budget // block_n))
    return block_m, block_n, (triton.cdiv(rows, block_m), triton.cdiv(n, block_n))


@kernel_op("rotmem_triton::unrotated_query")
def _query(h: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor | None, theta: torch.Tensor) -> torch.Tensor:
    """``h``, ``w``, ``w_hat`` ``[M, 2n]`` and ``theta [M, n]`` (unit last stride) -> ``q [M, 2n]``."""
    rows, n = theta.shape
    q = torch.empty((rows, 2 * n), dtype=promoted(h, w, w_hat, theta), device=h.device)
    if rows and n:
        block_m, block_n, grid = _blocks(rows, n, 2048)
        wh = w if w_hat is None else w_hat
        launch(
            _query_forward_kernel, grid, h, w, wh, theta, q, rows, n,
            h.stride(0), w.stride(0), wh.stride(0), theta.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, HAS_WH=w_hat is not None, FP64=is_fp64(h, w, w_hat, theta),
        )  # fmt: skip
    return q


@kernel_op("rotmem_triton::unrotated_query_backward")
def _query_backward(
    grad: torch.Tensor, h: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor | None, theta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(dh, dw, dw_hat, dtheta)``; ``dw_hat`` is empty when ``w_hat`` is None."""
    grad = grad.contiguous()
    rows, n = theta.shape
    grad_h = torch.empty((rows, 2 * n), dtype=h.dtype, device=h.device)
    grad_w = torch.empty((rows, 2 * n), dtype=w.dtype, device=h.device)
    grad_wh = torch.empty((rows, 2 * n) if w_hat is not None else (0,), dtype=w.dtype, device=h.device)
    grad_theta = torch.empty((rows, n), dtype=theta.dtype, device=h.device)
    if rows and n:
        block_m, block_n, grid = _blocks(rows, n, 1024)
        wh = w if w_hat is None else w_hat
        launch(
            _query_backward_kernel, grid, grad, h, w, wh, theta, grad_h, grad_w,
            grad_w if w_hat is None else grad_wh, grad_theta, rows, n,
            grad.stride(0), h.stride(0), w.stride(0), wh.stride(0), theta.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, HAS_WH=w_hat is not None,
            FP64=is_fp64(grad, h, w, w_hat, theta),
        )  # fmt: skip
    return grad_h, grad_w, grad_wh, grad_theta


def unrotated_query(
    h: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor | None, theta: torch.Tensor
) -> torch.Tensor:
    """``Rot(Rot(h, theta) * w * w_hat, -theta)``: ``[..., 2n]`` (all inputs broadcast).

    ``h``, ``w``, ``w_hat`` ``[..., 2n]``; ``theta [..., n]`` radians; ``w_hat=None`` for DistMult.
    """
    named = {"h": h, "w": w, "w_hat": w_hat, "theta": theta}
    for name, t in named.items():
        if t is not None:
            check_float(name, t)
    check_same_device(**named)
    n = theta.shape[-1]
    for name, t in named.items():
        if t is not None and name != "theta" and t.shape[-1] != 2 * n:
            raise ValueError(f"{name} has last dim {t.shape[-1]}, expected 2 * theta.shape[-1] = {2 * n}")
    batch = torch.broadcast_shapes(*(t.shape[:-1] for t in named.values() if t is not None))

    def flat(t: torch.Tensor | None, width: int) -> torch.Tensor | None:
        return None if t is None else rows_of(t.expand(*batch, width), width)

    q = _query(flat(h, 2 * n), flat(w, 2 * n), flat(w_hat, 2 * n), flat(theta, n))
    return q.reshape(*batch, 2 * n)
