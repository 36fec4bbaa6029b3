"""``unrotated_query`` on the native kernels (``csrc/cpu/unrotated_query.cpp``,
``csrc/cuda/unrotated_query.cu``), with its fake and autograd."""

from __future__ import annotations

from collections.abc import Callable

import torch

from rotmem.ops.native._extension import LIB, empty, masked, pairs, result_type


def unrotated_query(
    h: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor | None, theta: torch.Tensor
) -> torch.Tensor:
    """``rotmem.ops.reference.unrotated_query`` (inputs broadcast, dtypes promoted)."""
    n = pairs(h, "h")
    parts = [h, w, theta] if w_hat is None else [h, w, w_hat, theta]
    dtype = result_type(parts)
    batch = torch.broadcast_shapes(*(t.shape[:-1] for t in parts))

    def rows(t: torch.Tensor, width: int) -> torch.Tensor:
        return t.to(dtype).expand(*batch, width).reshape(-1, width)

    q = torch.ops.rotmem.unrotated_query(
        rows(h, 2 * n), rows(w, 2 * n), None if w_hat is None else rows(w_hat, 2 * n), rows(theta, n)
    )
    return q.view(*batch, 2 * n)


def register() -> dict[str, Callable]:
    """Register the autograd formulas; return the fake implementations by op name (the package
    registers those: torch wants them registered from the module ``csrc/rotmem.cpp`` names)."""

    def fake_unrotated_query(h, w, w_hat, theta):
        return torch.empty_like(h)

    def fake_unrotated_query_backward(grad, h, w, w_hat, theta):
        grad_w_hat = empty(h) if w_hat is None else torch.empty_like(w_hat)
        return torch.empty_like(h), torch.empty_like(w), grad_w_hat, torch.empty_like(theta)

    def setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def backward(ctx, grad):
        h, w, w_hat, theta = ctx.saved_tensors
        grads = torch.ops.rotmem.unrotated_query_backward(grad, h, w, w_hat, theta)
        if w_hat is None:
            grads = (grads[0], grads[1], None, grads[3])
        return masked(ctx, *grads)

    torch.library.register_autograd(LIB + "unrotated_query", backward, setup_context=setup)

    return {
        "unrotated_query": fake_unrotated_query,
        "unrotated_query_backward": fake_unrotated_query_backward,
    }
