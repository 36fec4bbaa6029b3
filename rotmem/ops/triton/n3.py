"""``n3(tensors, kind)``: the L4 / N3 regulariser, fused power-and-sum with its gradient (Triton).

``"l4"``: ``sum x^4`` over every real coordinate (the RoMem reference code); ``"modulus3"``:
``sum |z|^3`` over complex pairs (tkbc's N3). Each program reduces one tile to a partial sum, and
a deterministic ``sum`` of the partials finishes; the backward writes ``g * d/dx`` in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from rotmem.ops.triton._common import cast_for, check_float, is_fp64, kernel_op, launch, pow2, upcast
from rotmem.ops.triton.rotate import rows_of

KINDS = ("l4", "modulus3")


@triton.jit
def _sqrt(x, FP64: tl.constexpr):
    """Correctly rounded square root (``tl.sqrt_rn`` exists for float32 only)."""
    if FP64:
        return tl.sqrt(x)
    else:
        return tl.sqrt_rn(x)


@triton.jit
def _n3_forward_kernel(
    X,
    PART,
    M,
    n,
    stride_x,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    MODULUS: tl.constexpr,
    FP64: tl.constexpr,
):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < n)[None, :]
    x = X + rows[:, None] * stride_x + cols[None, :]
    re = upcast(tl.load(x, mask=mask, other=0.0), FP64)
    im = upcast(tl.load(x + n, mask=mask, other=0.0), FP64)
    re2 = re * re
    im2 = im * im
    if MODULUS:
        squared = re2 + im2
        value = squared * _sqrt(squared, FP64)
    else:
        value = re2 * re2 + im2 * im2
    tl.store(PART + pid_m * tl.num_programs(1) + pid_n, tl.sum(tl.sum(value, axis=1), axis=0))


@triton.jit
def _n3_backward_kernel(
    G, X, GX, M, n, stride_x,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, MODULUS: tl.constexpr, FP64: tl.constexpr,
):  # fmt: skip
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows < M)[:, None] & (cols < n)[None, :]
    x = X + rows[:, None] * stride_x + cols[None, :]
    re = upcast(tl.load(x, mask=mask, other=0.0), FP64)
    im = upcast(tl.load(x + n, mask=mask, other=0.0), FP64)
    g = upcast(tl.load(G), FP64)
    if MODULUS:  # d|z|^3/d re = 3 |z| re
        scale = 3.0 * g * _sqrt(re * re + im * im, FP64)
        gre = scale * re
        gim = scale * im
    else:  # d x^4/dx = 4 x^3
        gre = 4.0 * g * re * re * re
        gim = 4.0 * g * im * im * im
    gx = GX + rows[:, None] * (2 * n) + cols[None, :]
    tl.store(gx, cast_for(gre, GX), mask=mask)
    tl.store(gx + n, cast_for(gim, GX), mask=mask)


def _blocks(rows: int, n: int) -> tuple[int, int, tuple[int, int]]:
    block_n = pow2(n, high=128)
    block_m = pow2(rows, high=max(1, 4096 // block_n))
    return block_m, block_n, (triton.cdiv(rows, block_m), triton.cdiv(n, block_n))


@kernel_op("rotmem_triton::n3")
def _n3(x: torch.Tensor, modulus: bool) -> torch.Tensor:
    """The regulariser of one ``x [M, 2n]`` (unit last stride): a 0-d tensor (float32 or float64)."""
    rows, n = x.shape[0], x.shape[1] // 2
    acc = torch.float64 if is_fp64(x) else torch.float32
    block_m, block_n, grid = _blocks(rows, n)
    part = torch.zeros(grid if rows and n else (0,), dtype=acc, device=x.device)
    if rows and n:
        launch(
            _n3_forward_kernel, grid, x, part, rows, n, x.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, MODULUS=modulus, FP64=acc == torch.float64,
        )  # fmt: skip
    return part.sum()


@kernel_op("rotmem_triton::n3_backward")
def _n3_backward(grad: torch.Tensor, x: torch.Tensor, modulus: bool) -> torch.Tensor:
    """``grad * d n3(x) / dx``: ``[M, 2n]`` in ``x``'s dtype."""
    grad = grad.reshape(1).contiguous()
    rows, n = x.shape[0], x.shape[1] // 2
    grad_x = torch.empty((rows, 2 * n), dtype=x.dtype, device=x.device)
    if rows and n:
        block_m, block_n, grid = _blocks(rows, n)
        launch(
            _n3_backward_kernel, grid, grad, x, grad_x, rows, n, x.stride(0),
            BLOCK_M=block_m, BLOCK_N=block_n, MODULUS=modulus, FP64=is_fp64(x),
        )  # fmt: skip
    return grad_x


def n3(tensors: Sequence[torch.Tensor], kind: str = "l4") -> torch.Tensor:
    """Regulariser summed over ``tensors`` (each ``[..., 2n]``); the caller divides by batch size.

    ``"l4"``: sum of the 4th power of every real coordinate; ``"modulus3"``: sum over complex pairs
    of ``|z|^3``. A float32 scalar (float64 when an input is float64).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown regulariser kind {kind!r}; expected 'l4' or 'modulus3'")
    if len(tensors) == 0:
        raise ValueError("n3 needs at least one tensor")
    total = None
    for i, x in enumerate(tensors):
        check_float(f"tensors[{i}]", x)
        if x.shape[-1] % 2:
            raise ValueError(f"tensors[{i}] has odd last dim {x.shape[-1]}; expected 2n (split halves)")
        term = _n3(rows_of(x, x.shape[-1]), kind == "modulus3")
        total = term if total is None else total + term
    return total
