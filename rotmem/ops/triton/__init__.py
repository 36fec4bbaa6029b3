"""The Triton backend: the functions of ``rotmem.ops.reference``, as fused GPU kernels.

One op per module (kernels, launcher, ``torch.library`` operators; their fakes and autograd formulas
come from ``rotmem.ops.registry``), the
modules ``rotmem.ops.registry`` names: ``rotate``, ``unrotated_query``, ``unrotated_query_indexed``,
``cross_entropy``, ``n3``, ``rank_counts`` (``filtered_rank_counts``, no gradient). The ops live in
the ``rotmem_triton`` namespace (``torch.ops.rotmem_triton.*``), so ``torch.compile`` traces into
the kernels and ``torch.library.opcheck`` can test them.

Runs on CUDA tensors; on the CPU only under the Triton interpreter (``TRITON_INTERPRET=1`` set
before this package is imported), which the tests use with small shapes.
"""

from __future__ import annotations

import torch

from rotmem.ops import registry
from rotmem.ops.triton._common import INTERPRETED

# One function per op of ``rotmem.ops.registry.OPS`` (``score_all``: the reference's dense product).
globals().update(registry.functions("triton"))
# Their operators' autograd formulas, derived from the registry (the fakes: ``_common.kernel_op``).
registry.register_autograd("triton")


def unavailable_reason(device_type: str) -> str:
    """Why this backend cannot run on ``device_type`` tensors ("" when it can)."""
    if device_type == "cuda":
        if INTERPRETED:
            return "TRITON_INTERPRET=1 was set when rotmem.ops.triton was imported: kernels run on the CPU"
        return "" if torch.cuda.is_available() else "no CUDA device is visible to PyTorch"
    if device_type == "cpu":
        return (
            "" if INTERPRETED else "Triton runs on the CPU only under TRITON_INTERPRET=1 (set before import)"
        )
    return f"Triton kernels do not run on {device_type!r} tensors"


def is_available(device_type: str) -> bool:
    """True for ``"cuda"`` with a visible GPU, and for ``"cpu"`` under ``TRITON_INTERPRET=1``."""
    return unavailable_reason(device_type) == ""


__all__ = ["is_available", "unavailable_reason", *registry.NAMES]
