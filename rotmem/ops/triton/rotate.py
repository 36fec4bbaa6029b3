"""``rotate(x, theta)``: rotate each complex pair of ``x`` by ``theta`` (Triton, forward + backward).

Memory-bound: one read of ``x`` and ``theta``, one write of the result; ``sin``/``cos`` are
computed in registers, never stored.
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
from rotmem.ops.triton._pairs import load_pairs, rotate_pairs, store_pairs, unrotate_pairs


@triton.jit
def _rotate_forward_kernel(
    X,
    T,
    Y,
    M,
    n,
    stride_x,
    stride_t,
    stride_y,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    FP64: tl.constexpr,
):
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < n)[None, :]
    re, im = load_pairs(X, rows, cols, stride_x, n, mask, FP64)
    theta = upcast(tl.load(T + rows[:, None] * stride_t + cols[None, :], mask=mask, other=0.0), FP64)
    s, c = sincos(theta)
    yr, yi = rotate_pairs(re, im, s, c)
    store_pairs(Y, rows, cols, stride_y, n, yr, yi, mask)


@triton.jit
def _rotate_backward_kernel(
    G, X, T, GX, GT, M, n, stride_g, stride_x, stride_t,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    # dx = Rot(g, -theta) (rotations are orthogonal); dtheta = g_im * y_re - g_re * y_im.
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < n)[None, :]
    gr, gi = load_pairs(G, rows, cols, stride_g, n, mask, FP64)
    re, im = load_pairs(X, rows, cols, stride_x, n, mask, FP64)
    t_off = rows[:, None] * stride_t + cols[None, :]
    s, c = sincos(upcast(tl.load(T + t_off, mask=mask, other=0.0), FP64))
    yr, yi = rotate_pairs(re, im, s, c)
    gxr, gxi = unrotate_pairs(gr, gi, s, c)
    store_pairs(GX, rows, cols, 2 * n, n, gxr, gxi, mask)
    tl.store(GT + rows[:, None] * n + cols[None, :], cast_for(gi * yr - gr * yi, GT), mask=mask)


def _blocks(rows: int, n: int) -> tuple[int, int, tuple[int, int]]:
    block_n = pow2(n, high=128)
    block_m = pow2(rows, high=max(1, 2048 // block_n))
    return block_m, block_n, (triton.cdiv(rows, block_m), triton.cdiv(n, block_n))


@kernel_op("rotmem_triton::rotate")
def _rotate(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """``x [M, 2n]``, ``theta [M, n]`` (unit stride along the last dim) -> ``[M, 2n]``."""
    rows, n = theta.shape
    y = torch.empty((rows, 2 * n), dtype=promoted(x, theta), device=x.device)
    if rows and n:
        block_m, block_n, grid = _blocks(rows, n)
        launch(
            _rotate_forward_kernel, grid, x, theta, y, rows, n, x.stride(0), theta.stride(0), y.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, FP64=is_fp64(x, theta),
        )  # fmt: skip
    return y


@kernel_op("rotmem_triton::rotate_backward")
def _rotate_backward(
    grad: torch.Tensor, x: torch.Tensor, theta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(dL/dx [M, 2n], dL/dtheta [M, n])`` for ``grad = dL/dy [M, 2n]``."""
    grad = grad.contiguous()
    rows, n = theta.shape
    grad_x = torch.empty((rows, 2 * n), dtype=x.dtype, device=x.device)
    grad_theta = torch.empty((rows, n), dtype=theta.dtype, device=x.device)
    if rows and n:
        block_m, block_n, grid = _blocks(rows, n)
        launch(
            _rotate_backward_kernel, grid, grad, x, theta, grad_x, grad_theta, rows, n,
            grad.stride(0), x.stride(0), theta.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, FP64=is_fp64(x, theta, grad),
        )  # fmt: skip
    return grad_x, grad_theta


def rows_of(t: torch.Tensor, width: int) -> torch.Tensor:
    """``t`` as ``[rows, width]`` with unit stride along the last dim (a view when possible)."""
    t = t.reshape(-1, width)
    return t if t.stride(-1) == 1 else t.contiguous()


def rotate(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Rotate each complex pair ``j`` of ``x [..., 2n]`` by ``theta [..., n]`` radians (broadcast)."""
    check_float("x", x)
    check_float("theta", theta)
    check_same_device(x=x, theta=theta)
    n = theta.shape[-1]
    if x.shape[-1] != 2 * n:
        raise ValueError(f"x has last dim {x.shape[-1]}, expected 2 * theta.shape[-1] = {2 * n}")
    batch = torch.broadcast_shapes(x.shape[:-1], theta.shape[:-1])
    y = _rotate(rows_of(x.expand(*batch, 2 * n), 2 * n), rows_of(theta.expand(*batch, n), n))
    return y.reshape(*batch, 2 * n)
