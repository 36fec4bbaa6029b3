"""Backend selection: ``torch`` (reference), ``native`` (csrc), ``triton`` (CUDA).

Automatic by device unless ``ROTMEM_BACKEND=torch|native|triton`` forces one.
"""

from __future__ import annotations

import os
from types import ModuleType

import torch

BACKENDS = ("torch", "native", "triton")


def forced_backend() -> str | None:
    """The backend named by ``ROTMEM_BACKEND``, or None for automatic selection."""
    name = os.environ.get("ROTMEM_BACKEND", "").strip().lower()
    if not name or name == "auto":
        return None
    if name not in BACKENDS:
        raise ValueError(f"ROTMEM_BACKEND={name!r} is not one of {BACKENDS} (or 'auto')")
    return name


def backend_name(device: torch.device) -> str:
    """The backend used for tensors on ``device``."""
    forced = forced_backend()
    if forced is not None:
        return forced
    return "torch"


def backend_module(device: torch.device) -> ModuleType:
    """The module implementing the ops for ``device``."""
    name = backend_name(device)
    if name == "torch":
        from rotmem.ops import reference

        return reference
    raise NotImplementedError(f"backend {name!r} is not available in this build")
