"""``unrotated_query`` on the native kernels (``csrc/cpu/unrotated_query.cpp``,
``csrc/cuda/unrotated_query.cu``); its fake and gradient are
``rotmem.ops.registry``'s."""

from __future__ import annotations

import torch

from rotmem.ops.native._extension import pairs, result_type


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
