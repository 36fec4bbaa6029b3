"""``rotate`` on the native kernels (``csrc/cpu/rotate.cpp``, ``csrc/cuda/rotate.cu``); its fake
and gradient are ``rotmem.ops.registry``'s."""

from __future__ import annotations

import torch

from rotmem.ops.native._extension import pairs


def rotate(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """``rotmem.ops.reference.rotate`` (inputs broadcast, dtypes promoted)."""
    n = pairs(x, "x")
    dtype = torch.result_type(x, theta)
    batch = torch.broadcast_shapes(x.shape[:-1], theta.shape[:-1])
    x2 = x.to(dtype).expand(*batch, 2 * n).reshape(-1, 2 * n)
    t2 = theta.to(dtype).expand(*batch, n).reshape(-1, n)
    return torch.ops.rotmem.rotate(x2, t2).view(*batch, 2 * n)
