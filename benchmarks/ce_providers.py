"""Other implementations of the 1-vs-all cross-entropy, as providers for ``benchmarks.kernels``.

The loss is a linear cross-entropy over the entity table (``q @ entity^T``, then softmax cross-
entropy), so the LLM libraries' fused linear cross-entropies compute it too:

- ``linear``: this package's chunked cuBLAS/BLAS version (``rotmem.ops.linear_cross_entropy``,
  what the native backend runs on CUDA), timed on its own so that the CPU can compare it with the
  native tiled kernel;
- ``liger``: Liger-Kernel's fused linear cross-entropy (``pip install liger-kernel``; Triton, GPU);
- ``cce``: Apple's Cut Cross-Entropy (``pip install cut-cross-entropy``; Triton, GPU).

Each provider is a namespace of the reference ops with ``cross_entropy_all`` replaced, so the
whole ``step`` through it differs from eager's only in the cross-entropy: a step's gain is the
cross-entropy's. ``available(name, device)`` says why one cannot run here ("" when it can).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch

from rotmem.ops import reference
from rotmem.ops.linear_cross_entropy import linear_cross_entropy

PROVIDERS = ("linear", "liger", "cce")


def _liger(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    out = liger_fused_linear_cross_entropy(q, entity, target, reduction=reduction)
    return (out[0] if isinstance(out, tuple) else out).float()


def _cce(
    q: torch.Tensor, entity: torch.Tensor, target: torch.Tensor, reduction: str = "mean"
) -> torch.Tensor:
    from cut_cross_entropy import linear_cross_entropy as cut_cross_entropy

    # filter_eps=None: exact gradients (CCE's default skips the gradient of logits whose softmax is
    # below a threshold, an approximation the other providers do not make)
    return cut_cross_entropy(q, entity, target, reduction=reduction, filter_eps=None).float()


_CROSS_ENTROPY = {"linear": linear_cross_entropy, "liger": _liger, "cce": _cce}
_IMPORT = {"liger": ("liger_kernel", "liger-kernel"), "cce": ("cut_cross_entropy", "cut-cross-entropy")}


def unavailable_reason(name: str, device: str) -> str:
    """Why provider ``name`` cannot run on ``device`` here ("" when it can)."""
    if name not in _IMPORT:
        return ""
    module, package = _IMPORT[name]
    if device != "cuda":
        return f"{name} runs Triton kernels on a GPU only"
    try:
        __import__(module)
    except ImportError as error:
        return f"{name} is not installed (pip install {package}): {error}"
    return ""


def provider(name: str) -> SimpleNamespace:
    """The reference ops with provider ``name``'s ``cross_entropy_all``."""
    ops = {op: getattr(reference, op) for op in dir(reference) if not op.startswith("_")}
    return SimpleNamespace(**{**ops, "cross_entropy_all": _CROSS_ENTROPY[name]})
