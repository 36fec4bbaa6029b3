"""``rotate`` on the native kernels (``csrc/cpu/rotate.cpp``, ``csrc/cuda/rotate.cu``), with its
fake and autograd."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rotmem.ops.native._extension import LIB, masked, pairs


def rotate(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """``rotmem.ops.reference.rotate`` (inputs broadcast, dtypes promoted)."""
    n = pairs(x, "x")
    dtype = torch.result_type(x, theta)
    batch = torch.broadcast_shapes(x.shape[:-1], theta.shape[:-1])
    x2 = x.to(dtype).expand(*batch, 2 * n).reshape(-1, 2 * n)
    t2 = theta.to(dtype).expand(*batch, n).reshape(-1, n)
    return torch.ops.rotmem.rotate(x2, t2).view(*batch, 2 * n)


def register() -> dict[str, Callable]:
    """Register the autograd formulas; return the fake implementations by op name (the package
    registers those: torch wants them registered from the module ``csrc/rotmem.cpp`` names)."""

    def fake_rotate(x, theta):
        return torch.empty_like(x)

    def fake_rotate_backward(grad, x, theta):
        return torch.empty_like(x), torch.empty_like(theta)

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        x, theta = ctx.saved_tensors
        grad_x, grad_theta = torch.ops.rotmem.rotate_backward(grad, x, theta)
        return masked(ctx, grad_x, grad_theta)

    torch.library.register_autograd(LIB + "rotate", backward, setup_context=setup)

    return {"rotate": fake_rotate, "rotate_backward": fake_rotate_backward}
