"""Other implementations of the 1-vs-all cross-entropy, as providers for ``benchmarks.kernels``."""

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
