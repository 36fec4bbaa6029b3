"""The ``compile`` backend: ``torch.compile`` of each reference op, so the compiler's fusion of the
plain formulas is a backend like the hand-written ones (timed beside them, chosen where it is fastest).

Same functions as ``rotmem.ops.reference``, one per op of ``rotmem.ops.registry``. Each op is
compiled on its first call (seconds) and again for each new set of shapes, dtypes and devices
torch's guards see (``dynamic=None``: a second shape compiles once more with dynamic sizes). Inside
a model that is itself compiled, the outer compile traces the reference formula directly.

Runs on a CUDA tensor when Triton is installed, and on the CPU when a C++ compiler is on ``PATH``
(what Inductor generates its CPU kernels with).
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Sequence
from functools import cache

import torch

from rotmem.ops import reference
from rotmem.ops.registry import NAMES


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


def _compiled_op(name: str) -> Callable:
    """The backend's function for op ``name``: the compiled reference, with its signature."""

    @functools.wraps(getattr(reference, name))
    def run(*args, **kwargs):
        return _compiled(name)(*args, **kwargs)

    run.__module__ = __name__
    return run


# One function per op of ``rotmem.ops.registry.OPS``; the two below differ from the compiled reference.
globals().update({name: _compiled_op(name) for name in NAMES})


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


def n3(tensors: Sequence[torch.Tensor], kind: str = "l4") -> torch.Tensor:
    return _compiled("n3")(list(tensors), kind)
