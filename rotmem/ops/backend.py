"""Backend selection: ``torch`` (reference), ``native`` (csrc), ``triton`` (CUDA), ``compile``
(``torch.compile`` of the reference, ``rotmem.ops.compiled``).

Automatic by device and op unless ``ROTMEM_BACKEND=torch|native|triton|compile`` forces one: on a
CUDA tensor the fastest backend in the measured figures kept in ``rotmem.ops.cuda_measured`` that
runs here; on the CPU the native build, else torch. Each backend is a module with the same
functions as ``rotmem.ops.reference``.

``torch.compile`` traces the selection without a graph break: it reads ``ROTMEM_BACKEND`` and
guards on its value (a change recompiles), and runs ``available`` once at trace time, keeping its
answer as a constant, since the import behind it cannot be traced.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import torch

from rotmem.ops.cuda_measured import cuda_order

BACKENDS = ("torch", "native", "triton", "compile")
_MODULES = {
    "torch": "rotmem.ops.reference",
    "native": "rotmem.ops.native",
    "triton": "rotmem.ops.triton",
    "compile": "rotmem.ops.compiled",
}
_LOADED: dict[str, ModuleType | None] = {}  # backend name -> its module, None when it did not import


def forced_backend() -> str | None:
    """The backend named by ``ROTMEM_BACKEND``, or None for automatic selection."""
    name = os.environ.get("ROTMEM_BACKEND", "").strip().lower()
    if not name or name == "auto":
        return None
    if name not in BACKENDS:
        raise ValueError(f"ROTMEM_BACKEND={name!r} is not one of {BACKENDS} (or 'auto')")
    return name


def _load(name: str) -> ModuleType | None:
    """The backend's module, or None when it cannot be imported here (imported once)."""
    if name not in _LOADED:
        try:
            _LOADED[name] = importlib.import_module(_MODULES[name])
        except ImportError:
            _LOADED[name] = None
    return _LOADED[name]


@torch.compiler.assume_constant_result  # fixed for the process: imports, built kernels, devices
def available(name: str, device_type: str) -> bool:
    """Whether backend ``name`` can run on tensors of ``device_type`` (``"cpu"``/``"cuda"``)."""
    module = _load(name)
    if module is None:
        return False
    check = getattr(module, "is_available", None)
    return True if check is None else bool(check(device_type))


def backend_name(device: torch.device, op: str | None = None) -> str:
    """The backend used for ``op`` (a ``rotmem.ops`` function's name; None: ops in general) on
    ``device``."""
    forced = forced_backend()
    if forced is not None:
        return forced
    order = cuda_order(op) if device.type == "cuda" else ("native", "torch")
    return next(name for name in order if available(name, device.type))


def backend_module(device: torch.device, op: str | None = None) -> ModuleType:
    """The module implementing ``op`` for ``device``; a forced backend that cannot run raises."""
    name = backend_name(device, op)
    if not available(name, device.type):
        module = _load(name)
        why = "it did not import" if module is None else module.unavailable_reason(device.type)
        raise RuntimeError(f"backend {name!r} cannot run on {device.type} tensors here: {why}")
    return _LOADED[name]  # loaded by ``available``, so a traced dict lookup, not an import
