"""The ``compile`` backend: ``torch.compile`` of each reference op, so the compiler's fusion of the
plain formulas is a backend like the hand-written ones (timed beside them, chosen where it is fastest).

Same functions as ``rotmem.ops.reference``. Each op is compiled on its first call (seconds) and
again for each new set of shapes, dtypes and devices torch's guards see (``dynamic=None``: a second
shape compiles once more with dynamic sizes). Inside a model that is itself compiled, the outer
compile traces the reference formula directly.

Runs on a CUDA tensor when Triton is installed, and on the CPU when a C++ compiler is on ``PATH``
(what Inductor generates its CPU kernels with).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from functools import cache

import torch

from rotmem.ops import reference


def unavailable_reason(device_type: str) -> str:
    """Why ``torch.compile`` cannot generate kernels for ``device_type`` tensors here ("" when it can)."""
    if device_type == "cuda":
        if not torch.cuda.is_available():
            return "no CUDA device is visible to PyTorch"
        from torch.utils._triton import has_triton

        return "" if has_triton() else "Triton is not installed (pip install triton)"
    if device_type == "cpu":
        found = any(shutil.which(cxx) for cxx in ("g++", "c++", "clang++"))
        return "" if found else "no C++ compiler on PATH (Inductor builds its CPU kernels with one)"
    return f"torch.compile's kernels are not generated for {device_type!r} here"


def is_available(device_type: str) -> bool:
    """Whether ``torch.compile`` can generate kernels for ``device_type`` tensors here."""
    return unavailable_reason(device_type) == ""


def _compiled(name: str) -> Callable:
    """The reference op ``name``, compiled; inside a graph being compiled, the reference itself
    (the outer compile traces it: no compile call inside the trace)."""
    if torch.compiler.is_compiling():
        return getattr(reference, name)
    return _compile(name)


@cache
def _compile(name: str) -> Callable:
    return torch.compile(getattr(reference, name))


def rotate(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    return _compiled("rotate")(x, theta)


def unrotated_query(h, w, w_hat, theta) -> torch.Tensor:
    return _compiled("unrotated_query")(h, w, w_hat, theta)


def unrotated_query_indexed(
    entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0, sparse_grad=False
) -> torch.Tensor:
    if sparse_grad:  # a compiled graph's gradients are dense: the sparse table gradient is eager's
        return reference.unrotated_query_indexed(
            entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0, sparse_grad
        )
    return _compiled("unrotated_query_indexed")(
        entity, w_table, w_hat_table, ent_idx, rel_idx, tau, alpha, log_s, log_base, tau0, sparse_grad
    )


def score_all(q: torch.Tensor, entity: torch.Tensor) -> torch.Tensor:
    return _compiled("score_all")(q, entity)


def cross_entropy_all(q, entity, target, reduction: str = "mean") -> torch.Tensor:
    return _compiled("cross_entropy_all")(q, entity, target, reduction)


def filtered_rank_counts(q, entity, target, filter_ptr, filter_idx, target_score=None, entity_offset=0):
    return _compiled("filtered_rank_counts")(
        q, entity, target, filter_ptr, filter_idx, target_score, entity_offset
    )


def target_scores(q, entity, target, entity_offset: int = 0) -> torch.Tensor:
    return _compiled("target_scores")(q, entity, target, entity_offset)


def n3(tensors: Sequence[torch.Tensor], kind: str = "l4") -> torch.Tensor:
    return _compiled("n3")(list(tensors), kind)
