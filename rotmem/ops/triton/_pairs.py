"""Complex-pair math shared by the rotation and query kernels (split-halves layout, ROMEM.md).

A pair ``j`` is ``(re, im) = (x[j], x[n + j])``; ``s, c = sin(theta_j), cos(theta_j)``.
"""

from __future__ import annotations

import triton
import triton.language as tl

from rotmem.ops.triton._common import cast_for, upcast


@triton.jit
def load_pairs(P, rows, cols, stride, n, mask, FP64: tl.constexpr):
    """Pairs ``(re, im)`` at columns ``cols`` of rows ``rows`` (a block's rows, or gathered ids) of
    ``P`` (row stride ``stride``), upcast to the compute dtype; masked lanes read 0."""
    p = P + rows[:, None] * stride + cols[None, :]
    return upcast(tl.load(p, mask=mask, other=0.0), FP64), upcast(tl.load(p + n, mask=mask, other=0.0), FP64)


@triton.jit
def store_pairs(P, rows, cols, stride, n, re, im, mask):
    """Write pairs ``(re, im)`` in ``P``'s dtype at columns ``cols`` of rows ``rows``."""
    p = P + rows[:, None] * stride + cols[None, :]
    tl.store(p, cast_for(re, P), mask=mask)
    tl.store(p + n, cast_for(im, P), mask=mask)


@triton.jit
def rotate_pairs(re, im, s, c):
    """``Rot((re, im), theta)``."""
    return re * c - im * s, re * s + im * c


@triton.jit
def unrotate_pairs(re, im, s, c):
    """``Rot((re, im), -theta)``: the inverse and the adjoint of ``rotate_pairs``."""
    return re * c + im * s, im * c - re * s


@triton.jit
def query_pairs(hr, hi, rr, ri, s, c):
    """``q = Rot(Rot(h, theta) * rel, -theta)`` for one pair; ``rel`` is a real diagonal."""
    a, b = rotate_pairs(hr, hi, s, c)
    return unrotate_pairs(a * rr, b * ri, s, c)


@triton.jit
def query_pairs_backward(gr, gi, hr, hi, rr, ri, s, c):
    """Gradients of ``query_pairs`` given ``g = dL/dq``: ``(dh_re, dh_im, drel_re, drel_im, dtheta)``.

    With ``(a, b) = Rot(h, theta)`` and ``g' = Rot(g, theta)``, the two rotations' terms of
    ``dtheta`` combine into ``(rel_im - rel_re) * (g'_re * b + g'_im * a)``: no cancelling products,
    so it is as accurate as the inputs (a scalar ``rel`` commutes with the rotation: zero).
    """
    a, b = rotate_pairs(hr, hi, s, c)
    gap, gbp = rotate_pairs(gr, gi, s, c)
    ghr, ghi = unrotate_pairs(gap * rr, gbp * ri, s, c)
    gtheta = (ri - rr) * (gap * b + gbp * a)
    return ghr, ghi, gap * a, gbp * b, gtheta
