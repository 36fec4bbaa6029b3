"""``n3`` on the native kernels (``csrc/{cpu,cuda}/n3.*``); its fake and gradient are
``rotmem.ops.registry``'s."""

from __future__ import annotations

from collections.abc import Sequence

import torch

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
