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
  (float32: 1e-6, 16.8 units of 2^-24; bfloat16: 1e-3, room for the float32 internals); why the
  fused kernels meet it is in ``tests/ops/test_cross_entropy_all.py``'s docstring.
- ``roundings * u * max|truth|`` (``u`` the dtype's unit roundoff, 2^-8 for bfloat16): an op that by
  construction rounds its result to the dtype more often than the reference (the cross-entropy's
  gradients made in the forward sweep, rounded, then scaled by the output gradient in backward)
  says how many more times; each adds at most ``u`` relative.

``check`` runs an op, the eager reference and the float64 truth (with perturbed inputs for the
noise term) forward and backward and applies the bound to the output and every gradient: one
procedure for every backend and op (``tests/ops/test_<op>.py``).
"""

from __future__ import annotations

import torch

FLOOR = {torch.float32: 1e-6, torch.bfloat16: 1e-3}  # relative to max|truth|
NOISE = 4 * torch.finfo(torch.float32).eps  # relative input perturbation for the noise term


def assert_accurate(
    name: str,
    out: torch.Tensor,
    ref: torch.Tensor,
    truth: torch.Tensor,
    dtype: torch.dtype,
    noise: float,
    roundings: int = 0,
) -> None:
    """``max|out - truth| <= 2 max|ref - truth| + noise + (FLOOR[dtype] + roundings * u) max|truth|``,
    with ``out``, ``ref`` (the eager reference in ``dtype``) and ``truth`` (float64) of one shape and
    ``u`` the unit roundoff of ``dtype``."""
    assert out.shape == truth.shape, f"{name}: shape {tuple(out.shape)} != {tuple(truth.shape)}"
    if truth.numel() == 0:
        return
    out, ref, truth = out.detach().double(), ref.detach().double(), truth.detach().double()
    err, ref_err = (out - truth).abs().max().item(), (ref - truth).abs().max().item()
    unit_roundoff = torch.finfo(dtype).eps / 2
    bound = 2 * ref_err + noise + (FLOOR[dtype] + roundings * unit_roundoff) * truth.abs().max().item()
    assert err <= bound, (
        f"{name} {dtype}: error {err:.3g} > {bound:.3g} (reference's own error {ref_err:.3g})"
    )


def randn(*shape, device="cpu", scale=1.0, seed=0) -> torch.Tensor:
    """float64 normal values (seeded, drawn on the CPU so every device gets the same) times ``scale``."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).to(device)


def run(fn, inputs, wrt, grad_out):
    """``fn(*inputs)`` and the gradients of ``inputs[i]`` for ``i in wrt``, given ``grad_out`` (float64)."""
    args = [t.detach().clone().requires_grad_(i in wrt) if i in wrt else t for i, t in enumerate(inputs)]
    out = fn(*args)
    grads = torch.autograd.grad(out, [args[i] for i in wrt], grad_out.to(out.dtype)) if wrt else ()
    return out, grads, args


def check(op_fn, reference_fn, truth_fn, inputs, wrt, dtype, exact=(), name="op", grad_roundings=0) -> None:
    """An op's output and its gradients against the float64 truth, within ``assert_accurate``'s bound;
    the output has the reference's dtype and each gradient its input's.

    ``inputs``: float64 (or integer, or None) tensors; floating ones are rounded to ``dtype`` for the
    op and the reference, and the truth (``truth_fn``: the reference's math in float64) sees the same
    rounded values. ``wrt``: the indices differentiated. ``exact``: indices never perturbed for the
    noise term (days, which are exact in every dtype here). ``grad_roundings``: how many more times
    than the reference the op rounds each gradient (``assert_accurate``'s ``roundings``).
    """
    floating = [t is not None and t.is_floating_point() for t in inputs]
    device = next(t.device for t in inputs if t is not None)
    rounded = [t.to(dtype) if f else t for t, f in zip(inputs, floating, strict=True)]
    as64 = [t.double() if f else t for t, f in zip(rounded, floating, strict=True)]
    g = torch.Generator(device="cpu").manual_seed(1)
    with torch.no_grad():
        shape = truth_fn(*as64).shape
    grad_out = torch.randn(shape, generator=g, dtype=torch.float64).to(device)
    truth, truth_grads, _ = run(truth_fn, as64, wrt, grad_out)
    perturbed = [
        t * (1 + NOISE * torch.randn(t.shape, generator=g, dtype=torch.float64).to(device))
        if f and i not in exact
        else t
        for i, (t, f) in enumerate(zip(as64, floating, strict=True))
    ]
    moved, moved_grads, _ = run(truth_fn, perturbed, wrt, grad_out)
    out, grads, args = run(op_fn, rounded, wrt, grad_out)
    ref, ref_grads, _ = run(reference_fn, rounded, wrt, grad_out)
    assert out.dtype == ref.dtype, f"{name}: output dtype {out.dtype} != the reference's {ref.dtype}"
    for i, grad in zip(wrt, grads, strict=True):
        assert grad.dtype == args[i].dtype, f"{name}: grad[{i}] dtype {grad.dtype} != its input's"
    labels = ["output"] + [f"grad[{i}]" for i in wrt]
    for label, o, r, t, m in zip(
        labels, [out, *grads], [ref, *ref_grads], [truth, *truth_grads], [moved, *moved_grads], strict=True
    ):
        noise = (m.detach().double() - t.detach().double()).abs().max().item() if t.numel() else 0.0
        roundings = 0 if label == "output" else grad_roundings
        assert_accurate(f"{name} {label}", o, r, t, dtype, noise, roundings)
