"""The extension ``rotmem._C``: loading it, the CPU instruction set its kernels use, where it runs,
and the small helpers every native op module shares."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Sequence

import torch

_BUILD_HINT = (
    "rebuild it against the torch installed now with `pip install --no-build-isolation -e .` in the "
    "checkout (or reinstall the rotmem wheel built for this torch)"
)
try:
    from rotmem import _C
except ImportError as error:  # not built (ROTMEM_SKIP_NATIVE=1), or built against another torch
    _C = None
    _IMPORT_ERROR = str(error).splitlines()[0]
    if os.environ.get("ROTMEM_BACKEND", "").strip().lower() not in ("torch", "triton"):
        # once per process (this module is imported once); ROTMEM_BACKEND=torch says it is intended
        warnings.warn(
            f"rotmem: the native kernels (rotmem._C) did not load ({_IMPORT_ERROR}); CPU ops fall back "
            f"to the slower torch backend. To fix, {_BUILD_HINT}; to silence, set ROTMEM_BACKEND=torch.",
            RuntimeWarning,
            stacklevel=2,
        )

LOADED = _C is not None  # the registry's fakes and autograd formulas are registered only then


# --- the CPU instruction set (csrc/cpu/isa.h) -----------------------------------------------------


def cpu_isa() -> str | None:
    """The instruction set the CPU kernels' SIMD loops use now (``avx512``, ``avx2``, ``baseline``)."""
    return None if _C is None else _C.cpu_isa()


def supported_cpu_isas() -> list[str]:
    """The instruction sets this build and CPU can run, widest first (empty without the extension)."""
    return [] if _C is None else list(_C.supported_cpu_isas())


def set_cpu_isa(name: str) -> None:
    """Run the CPU kernels with ``name`` (``avx512``, ``avx2``, ``baseline``, or ``auto``: the widest).

    A set this CPU cannot execute, or an unknown name, raises ``ValueError``.
    """
    if _C is None:
        raise RuntimeError(f"the extension rotmem._C is not loaded ({_IMPORT_ERROR})")
    try:
        _C.set_cpu_isa(name)
    except ValueError as error:
        raise ValueError(f"{error}; this machine runs {supported_cpu_isas()}") from None


@contextlib.contextmanager
def forced_cpu_isa(name: str) -> Iterator[None]:
    """Run the CPU kernels with instruction set ``name`` inside the block (tests)."""
    before = cpu_isa()
    set_cpu_isa(name)
    try:
        yield
    finally:
        set_cpu_isa(before)


def _select_cpu_isa_from_environment() -> None:
    """``ROTMEM_CPU_ISA=avx512|avx2|baseline`` forces a narrower instruction set than the CPU's widest."""
    name = os.environ.get("ROTMEM_CPU_ISA", "").strip().lower()
    if name:
        try:
            set_cpu_isa(name)
        except ValueError as error:
            raise ValueError(f"ROTMEM_CPU_ISA={name!r}: {error}") from None


def is_available(device_type: str) -> bool:
    """Whether the native kernels can run on tensors of ``device_type`` (``"cpu"`` or ``"cuda"``)."""
    if _C is None:
        return False
    if device_type == "cpu":
        return True
    return device_type == "cuda" and bool(_C.WITH_CUDA) and torch.cuda.is_available()


def unavailable_reason(device_type: str) -> str:
    """Why ``is_available(device_type)`` is False, in words that say what to do."""
    if _C is None:
        return f"the extension rotmem._C did not load ({_IMPORT_ERROR}); {_BUILD_HINT}"
    if device_type == "cuda" and not _C.WITH_CUDA:
        return (
            "rotmem was built without CUDA support; rebuild where the CUDA toolkit and a CUDA build of "
            "torch are present (ROTMEM_FORCE_CUDA=1 forces it), or use ROTMEM_BACKEND=triton or torch"
        )
    if device_type == "cuda":
        return "no CUDA device is visible"
    return f"the native backend has no kernels for {device_type!r} tensors"


# --- shared by the op modules --------------------------------------------------------------------

LIB = "rotmem::"  # the operator namespace of csrc/rotmem.cpp


def pairs(x: torch.Tensor, name: str) -> int:
    """``n`` of ``x [..., 2n]``; a ValueError naming ``name`` otherwise."""
    if x.dim() == 0 or x.shape[-1] % 2 or x.shape[-1] == 0:
        raise ValueError(f"{name} must be [..., 2n] with n >= 1 (split-halves complex), got {tuple(x.shape)}")
    return x.shape[-1] // 2


def result_type(tensors: Sequence[torch.Tensor]) -> torch.dtype:
    """The dtype eager PyTorch gives an expression mixing ``tensors``."""
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


if _C is not None:
    _select_cpu_isa_from_environment()
