"""``n3`` on the native kernels (``csrc/{cpu,cuda}/n3.*``), with its fake and autograd."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from rotmem.ops.native._extension import LIB, acc_dtype

KINDS = ("l4", "modulus3")


def n3(tensors: Sequence[torch.Tensor], kind: str = "l4") -> torch.Tensor:
    """``rotmem.ops.reference.n3``, one fused kernel per tensor (forward and backward); float32
    (float64 for float64 inputs)."""
    if kind not in KINDS:
        raise ValueError(f"unknown regulariser kind {kind!r}; expected 'l4' or 'modulus3'")
    if len(tensors) == 0:
        raise ValueError("n3 needs at least one tensor")
    total = None
    for x in tensors:
        term = torch.ops.rotmem.n3(x.reshape(-1, x.shape[-1]), kind)
        total = term if total is None else total + term
    return total


def register() -> dict[str, Callable]:
    """Register the autograd formulas; return the fake implementations by op name (the package
    registers those: torch wants them registered from the module ``csrc/rotmem.cpp`` names)."""

    def fake_n3(x, kind):
        return x.new_empty((), dtype=acc_dtype(x))

    def fake_n3_backward(grad, x, kind):
        return torch.empty_like(x)

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.kind = inputs[1]

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return torch.ops.rotmem.n3_backward(grad, x, ctx.kind), None

    torch.library.register_autograd(LIB + "n3", backward, setup_context=setup)

    return {"n3": fake_n3, "n3_backward": fake_n3_backward}
