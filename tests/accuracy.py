"""The accuracy bound every backend's op tests use (flash-attention's rule, with a floor).

Against a float64 truth computed from the same (rounded) inputs, a kernel's error (max over
elements) is at most ``2 * ref_err + noise + FLOOR[dtype] * max|truth|``:

- ``ref_err``: the eager reference's own error in the same dtype on this machine: the rounding
  both share and that varies between machines (BLAS products, the angles' float32 rounding, for
  bfloat16 the rounding of every intermediate). A kernel does the same products in other blocks
  and orders, which changes the rounding but not its size: the factor 2.
- ``noise``: how far the truth moves when the inputs move by ``NOISE`` (4 float32 eps, relative):
  the problem's conditioning (a sine of a 4000-radian angle amplifies any rounding of the angle).
- ``FLOOR * max|truth|``: the kernel's own elementwise arithmetic and its one final rounding
  (float32: 1e-6, 16.8 units of 2^-24; bfloat16: 1e-3, room for the float32 internals); why each
  backend meets it is in its test module (``tests/test_ops_native.py``, ``tests/test_ops_triton.py``).
"""

from __future__ import annotations

import torch

FLOOR = {torch.float32: 1e-6, torch.bfloat16: 1e-3}  # relative to max|truth|
NOISE = 4 * torch.finfo(torch.float32).eps  # relative input perturbation for the noise term


def assert_accurate(
    name: str, out: torch.Tensor, ref: torch.Tensor, truth: torch.Tensor, dtype: torch.dtype, noise: float
) -> None:
    """``max|out - truth| <= 2 max|ref - truth| + noise + FLOOR[dtype] max|truth|``, with ``out``,
    ``ref`` (the eager reference in ``dtype``) and ``truth`` (float64) of one shape."""
    assert out.shape == truth.shape, f"{name}: shape {tuple(out.shape)} != {tuple(truth.shape)}"
    if truth.numel() == 0:
        return
    out, ref, truth = out.detach().double(), ref.detach().double(), truth.detach().double()
    err, ref_err = (out - truth).abs().max().item(), (ref - truth).abs().max().item()
    bound = 2 * ref_err + noise + FLOOR[dtype] * truth.abs().max().item()
    assert err <= bound, (
        f"{name} {dtype}: error {err:.3g} > {bound:.3g} (reference's own error {ref_err:.3g})"
    )
