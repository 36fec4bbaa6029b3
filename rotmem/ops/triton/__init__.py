"""The Triton backend: the functions of ``rotmem.ops.reference``, as fused GPU kernels.

One op per module (kernels, launcher, ``torch.library`` registration with its autograd formula):
``rotate``, ``unrotated_query``, ``unrotated_query_indexed``, ``cross_entropy``, ``n3``,
``rank_counts`` (``filtered_rank_counts``, no gradient). The ops live in the ``rotmem_triton``
namespace (``torch.ops.rotmem_triton.*``), so ``torch.compile`` traces into the kernels and
``torch.library.opcheck`` can test them.

Runs on CUDA tensors; on the CPU only under the Triton interpreter (``TRITON_INTERPRET=1`` set
before this package is imported), which the tests use with small shapes.
"""

from __future__ import annotations

import torch

from rotmem.ops.reference import score_all  # one dense product serves every backend
from rotmem.ops.triton._common import INTERPRETED
from rotmem.ops.triton.cross_entropy import cross_entropy_all
from rotmem.ops.triton.n3 import n3
from rotmem.ops.triton.rank_counts import filtered_rank_counts, target_scores
from rotmem.ops.triton.rotate import rotate
from rotmem.ops.triton.unrotated_query import unrotated_query
from rotmem.ops.triton.unrotated_query_indexed import unrotated_query_indexed


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


__all__ = [
    "cross_entropy_all",
    "filtered_rank_counts",
    "is_available",
    "n3",
    "rotate",
    "score_all",
    "target_scores",
    "unavailable_reason",
    "unrotated_query",
    "unrotated_query_indexed",
]
