"""Complex-pair math shared by the rotation and query kernels (split-halves layout, ROMEM.md).

A pair ``j`` is ``(re, im) = (x[j], x[n + j])``; ``s, c = sin(theta_j), cos(theta_j)``.
"""

from __future__ import annotations

import triton
import triton.language as tl  # noqa: F401  (the jit functions below are Triton code)


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

    ``dtheta`` has one term per rotation: for ``y = Rot(x, phi)``, ``dL/dphi = g_im*y_re - g_re*y_im``;
    the outer rotation is by ``-theta``.
    """
    a, b = rotate_pairs(hr, hi, s, c)
    qr, qi = unrotate_pairs(a * rr, b * ri, s, c)
    gap, gbp = rotate_pairs(gr, gi, s, c)
    ga = gap * rr
    gb = gbp * ri
    ghr, ghi = unrotate_pairs(ga, gb, s, c)
    gtheta = gr * qi - gi * qr + gb * a - ga * b
    return ghr, ghi, gap * a, gbp * b, gtheta
