"""The backends an op's tests run on, one pytest parameter each (the ``backend`` fixture of
``conftest.py``): the native CPU kernels under each instruction set (``csrc/cpu/isa.h``: AVX-512,
AVX2, baseline SSE2), native CUDA, Triton interpreted on the CPU (``TRITON_INTERPRET=1``, which
``conftest.py`` sets when no GPU is visible) and Triton compiled on CUDA; the pure-torch reference
on the CPU and CUDA where a test asks for it (``params(names=(..., "reference"))``). A case this
machine cannot run shows as skipped, with the reason.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

import pytest
import torch

CPU_ISAS = ("avx512", "avx2", "baseline")


@dataclass(frozen=True)
class Backend:
    name: str  # "native", "triton" or "reference"
    device: str  # "cpu" or "cuda"
    isa: str | None = None  # the native CPU kernels' instruction set

    def __str__(self) -> str:
        return "-".join(filter(None, (self.name, self.device, self.isa)))

    @property
    def ops(self) -> ModuleType:
        """The backend's module: ``rotmem.ops.native``, ``rotmem.ops.triton`` or ``rotmem.ops.reference``."""
        return importlib.import_module(f"rotmem.ops.{self.name}")

    @property
    def env_name(self) -> str:
        """The backend's ``ROTMEM_BACKEND`` value (the reference is ``torch`` there)."""
        return "torch" if self.name == "reference" else self.name

    @property
    def interpreted(self) -> bool:
        """Triton on the CPU: every kernel runs in the interpreter (slow: small shapes only)."""
        return self.name == "triton" and self.device == "cpu"

    def skip_reason(self) -> str:
        """Why this machine cannot run the case ("" when it can)."""
        if self.name == "reference":
            return "" if self.device == "cpu" or torch.cuda.is_available() else "no GPU is visible"
        if self.name == "triton":
            try:
                ops = self.ops
            except ImportError as error:
                return f"Triton is not installed ({error})"
            return ops.unavailable_reason(self.device)
        native = self.ops
        if not native.is_available(self.device):
            return native.unavailable_reason(self.device)
        if self.isa is not None and self.isa not in native.supported_cpu_isas():
            return f"this CPU cannot run {self.isa} (it runs {', '.join(native.supported_cpu_isas())})"
        return ""


ALL_BACKENDS = [Backend("native", "cpu", isa) for isa in CPU_ISAS] + [
    Backend("native", "cuda"),
    Backend("triton", "cpu"),
    Backend("triton", "cuda"),
]
REFERENCE_BACKENDS = [Backend("reference", "cpu"), Backend("reference", "cuda")]


def params(
    names: tuple[str, ...] = ("native", "triton"),
    devices: tuple[str, ...] = ("cpu", "cuda"),
    per_isa: bool = True,
) -> list:
    """``pytest.param`` per backend case, for ``@pytest.mark.parametrize("backend", ..., indirect=True)``
    (a test that concerns some backends only). ``per_isa=False``: the native CPU backend once, as the
    machine runs it (for an op with no SIMD code of its own, a plain BLAS product)."""
    cases = ALL_BACKENDS + REFERENCE_BACKENDS
    if not per_isa:
        cases = [b for b in cases if b.isa is None] + [Backend("native", "cpu")]
    return [pytest.param(b, id=str(b)) for b in cases if b.name in names and b.device in devices]
